"""Shared pieces of the model-file loaders.

Both loaders read the file into a flat list of :class:`_Node` records (one
per link / MJCF body, parent-first) and hand it to :func:`assemble`, which
merges rigid attachments into their parent body, lumps inertias, checks
that no movable joint carries a massless subtree, and fills a
:class:`gear.Model`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..joints import Joint
from ..spatial import SE3, Inertia

__all__ = ["ModelFileError", "LoopClosureSpec"]


class ModelFileWarning(UserWarning):
    """A model file loaded with a defect the dynamics do not depend on
    (e.g. a joint whose lower limit is above its upper limit: limits never
    enter the dynamics); ``strict=True`` makes it a :class:`ModelFileError`.
    Impossible inertias warn with :class:`gear.InertiaWarning` instead."""


class ModelFileError(ValueError):
    """A model file is malformed; the message names the file and element."""


@dataclass
class LoopClosureSpec:
    """A loop closure read from a model file (MJCF ``<equality>``), kept as a
    description until it is turned into a constraint.

    Attributes
    ----------
    kind : str
        ``"ball"`` (MJCF ``connect``: 3 rows) or ``"weld"`` (6 rows).
    body_a, body_b : str
        Body names (``"world"`` allowed).
    placement_a, placement_b : gear.SE3
        Constraint frames in each body's frame.
    name : str or None
    """

    kind: str
    body_a: str
    placement_a: SE3
    body_b: str
    placement_b: SE3
    name: str | None = None
    params: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------
# XML reading and attribute parsing
# ---------------------------------------------------------------------------

def parse_xml(path):
    """Parse ``path`` with defusedxml (no entity expansion, no external
    references) and return the root element.

    Leading whitespace and a UTF-8 byte-order mark before the XML
    declaration are dropped first: the XML specification puts the
    declaration at the very start, but the loaders of the URDF (urdfdom,
    Pinocchio) and MJCF (MuJoCo) reference implementations accept such
    files, and so does gear.

    Raises
    ------
    ModelFileError
        If the file is not well-formed XML or declares entities.
    OSError
        If the file cannot be read.
    """
    import xml.etree.ElementTree as _ET

    import defusedxml
    import defusedxml.ElementTree as ET

    with open(path, "rb") as fh:  # let FileNotFoundError & co. propagate
        data = _strip_prolog(fh.read())
    try:
        root = ET.fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except defusedxml.EntitiesForbidden as exc:
        raise ModelFileError(
            f"{path}: XML entity declarations are not allowed (entity {exc.name!r}); "
            "model files must not use <!ENTITY> (possible entity-expansion attack)"
        ) from None
    except defusedxml.DefusedXmlException as exc:
        raise ModelFileError(f"{path}: rejected unsafe XML construct: {exc}") from None
    except _ET.ParseError as exc:
        raise ModelFileError(f"{path}: not a well-formed XML document ({exc})") from None
    return root


def _strip_prolog(data):
    """``data`` (bytes) without the whitespace and byte-order marks before
    its first markup, in any order (``"\\n\\ufeff<?xml"`` too).  A UTF-16 or
    UTF-32 document with its byte-order mark is re-encoded in its encoding
    with one mark; one without a mark (a NUL byte among the first four) is
    returned unchanged."""
    import codecs

    for bom, codec in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                       (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                text = data.decode(codec)
            except UnicodeDecodeError:       # the parser reports it
                return data
            return text.lstrip(" \t\r\n\ufeff").encode(codec)
    if b"\x00" in data[:4]:
        return data
    while True:
        stripped = data.lstrip(b" \t\r\n")
        if stripped.startswith(b"\xef\xbb\xbf"):
            stripped = stripped[3:]
        if stripped == data:
            return data
        data = stripped


class Reader:
    """Attribute parsing with error messages naming the file and element."""

    def __init__(self, path, strict=False):
        self.path = os.fspath(path)
        self.strict = strict

    def error(self, where, msg):
        return ModelFileError(f"{self.path}: {where}: {msg}" if where else f"{self.path}: {msg}")

    def lenient(self, where, problem, consequence, stacklevel=4):
        """A defect the dynamics do not depend on: with ``strict`` raise
        :class:`ModelFileError`, else warn with :class:`ModelFileWarning`
        naming the file, the element and what was loaded instead."""
        import warnings

        if self.strict:
            raise self.error(where, problem)
        warnings.warn(f"{self.path}: {where}: {problem}; {consequence} (strict=True makes this "
                      "an error)", ModelFileWarning, stacklevel=stacklevel)

    def floats(self, text, n, where, attr, default=None):
        """Parse ``n`` whitespace-separated finite floats (``n=None``: any count)."""
        if text is None:
            if default is None:
                raise self.error(where, f"missing required attribute {attr!r}")
            return np.array(default, dtype=float)
        parts = text.split()
        if n is not None and len(parts) != n:
            raise self.error(where, f"attribute {attr}={text!r} must have {n} numbers, got {len(parts)}")
        out = np.empty(len(parts))
        for k, s in enumerate(parts):
            try:
                v = float(s)
            except ValueError:
                raise self.error(where, f"attribute {attr}={text!r}: {s!r} is not a number") from None
            if not math.isfinite(v):
                raise self.error(where, f"attribute {attr}={text!r}: {s!r} is not a finite number")
            out[k] = v
        return out

    def float1(self, text, where, attr, default=None):
        return float(self.floats(text, 1, where, attr, None if default is None else [default])[0])

    def inertia(self, mass, com, I_com, where):
        """``gear.Inertia`` under gear's inertia loading policy (``docs/models.md``,
        "Errors"; the same policy as :class:`gear.Inertia`).

        Returns ``None`` for a massless frame (mass 0, zero rotational
        inertia).  A ``ValueError`` (negative mass, clearly indefinite
        inertia, and with ``strict`` an impossible one) is re-raised as
        :class:`ModelFileError`; an :class:`~gear.InertiaWarning` is
        re-issued naming the file and element.
        """
        import warnings

        from ..spatial import InertiaWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", InertiaWarning)
            try:
                I = Inertia(mass, com, I_com, strict=self.strict)
            except (ValueError, TypeError) as exc:
                raise self.error(where, f"invalid inertia: {exc}") from None
        for w in caught:
            if issubclass(w.category, InertiaWarning):
                msg = str(w.message).replace("an inertia: ", "", 1)
                warnings.warn(f"{self.path}: {where}: {msg}", InertiaWarning, stacklevel=4)
            else:  # pragma: no cover - pass other warnings through
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return None if I.is_massless else I

    def axis(self, text, where, attr="axis", default=(1.0, 0.0, 0.0)):
        a = self.floats(text, 3, where, attr, default)
        n = float(np.linalg.norm(a))
        if n < 1e-12:
            raise self.error(where, f"{attr} must be a non-zero vector, got {a.tolist()}")
        return a / n


# ---------------------------------------------------------------------------
# Tree assembly
# ---------------------------------------------------------------------------

@dataclass
class _Node:
    """One link / body of the file, attached to ``parent`` (a node name or
    ``"world"``).

    ``placement`` is the pose of the joint frame in the parent *node* frame;
    the node frame is the joint's child frame.  ``merge=True`` welds the
    node into its parent body (inertia lumped, node recorded as a frame).
    ``frame_offset`` is the pose, in the node frame, of the frame recorded
    under ``name`` in ``model.frames`` (MJCF bodies whose joint has a
    ``pos``).  ``q0`` is the node's reference configuration (default: the
    joint's neutral configuration).
    """

    name: str
    parent: str
    joint: Joint
    joint_name: str
    placement: SE3
    inertia: Inertia | None
    merge: bool = False
    where: str = ""
    frame_offset: SE3 | None = None
    q0: np.ndarray | None = None


def assemble(model, nodes, reader):
    """Fill ``model`` from parent-first ``nodes``; returns ``model``.

    Merged nodes' inertias are lumped into their body with
    ``Inertia.transform`` and ``+``; massless merged nodes are skipped.
    Every node is recorded in ``model.frames`` as ``(body index, SE3)``
    (body index ``-1`` for nodes welded to the world).

    """
    target = {}        # node name -> (gear body name | "world", SE3 of node in body)
    bodies = []        # non-merged nodes, in order, with composed placements
    inertia = {}
    parent_body = {}
    for n in nodes:
        if n.parent == "world":
            pb, Tp = "world", SE3()
        else:
            pb, Tp = target[n.parent]
        T = Tp * n.placement
        if n.merge:
            target[n.name] = (pb, T)
            if n.inertia is not None and pb != "world":
                I = n.inertia.transform(T)
                inertia[pb] = I if inertia[pb] is None else inertia[pb] + I
        else:
            target[n.name] = (n.name, SE3())
            inertia[n.name] = n.inertia
            parent_body[n.name] = pb
            bodies.append((n, T))

    # A movable joint whose whole subtree is massless makes S^T Ihat S
    # singular: that is reported by forward dynamics when it is called
    # (SingularInertiaError naming the joint), not at load time, as
    # Pinocchio does (docs/models.md, "Errors").

    for n, T in bodies:
        model.add_body(n.name, parent_body[n.name], n.joint, placement=T,
                       inertia=inertia[n.name], joint_name=n.joint_name)
    for n in nodes:
        b, T = target[n.name]
        if n.frame_offset is not None:
            T = T * n.frame_offset
        model.frames[n.name] = (model.body_index(b), T)
    return model
