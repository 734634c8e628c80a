"""Argument validation at the public boundary.

Every public function converts its array arguments through :func:`as_array`,
which returns a C-contiguous float64 copy (or view) and raises a ``ValueError``
or ``TypeError`` that names the argument and the expected shape.  Kernels
behind the boundary never check again.
"""
from __future__ import annotations

import numpy as np

__all__ = ["as_array", "as_batch", "check_finite", "joint_mask"]


def _shape_str(shape):
    return "(" + ", ".join(str(s) for s in shape) + (",)" if len(shape) == 1 else ")")


def check_finite(name, a):
    """Raise ``ValueError`` if ``a`` contains NaN or inf."""
    if not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))
        raise ValueError(
            f"{name} contains non-finite values (NaN or inf), first at index "
            f"{tuple(int(i) for i in bad[0])}; pass finite numbers"
        )


def _to_array(name, value):
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nested lists
        raise ValueError(f"{name} could not be converted to a numeric array ({exc}); "
                         "pass a rectangular array") from None


def check_scalar(name, value):
    """A finite real number, as float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def as_array(name, value, shape, finite=True):
    """Convert ``value`` to a C-contiguous float64 array of ``shape``.

    ``shape`` entries that are ``None`` accept any length.  Integer and
    float inputs are accepted (converted to float64); complex, object and
    string inputs raise ``TypeError``.
    """
    if value is None:
        raise TypeError(f"{name} is required, got None; expected an array of shape {_shape_str(shape)}")
    arr = _to_array(name, value)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{name} must be a real numeric array (float64), got dtype {arr.dtype}"
        )
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise ValueError(
            f"{name} has wrong shape: expected {_shape_str(shape)}, got {_shape_str(arr.shape)}"
        )
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if finite:
        check_finite(name, arr)
    return arr


def as_batch(name, value, inner, batch=None):
    """Convert ``value`` to shape ``inner`` or ``(N,) + inner``.

    Returns ``(array_2d_or_more, is_batch)`` where the array always has a
    leading batch axis.  If ``batch`` is given (an int or ``None``) the
    leading dimension must match it; a single state is broadcast to
    ``batch`` states when ``batch`` is an int and the input is unbatched.
    """
    if value is None:
        raise TypeError(f"{name} is required, got None; expected shape {_shape_str(inner)} or (N,) + {_shape_str(inner)}")
    arr = _to_array(name, value)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a real numeric array (float64), got dtype {arr.dtype}")
    if arr.ndim == len(inner):
        if tuple(arr.shape) != tuple(inner):
            raise ValueError(
                f"{name} has wrong shape: expected {_shape_str(inner)} or (N,) + {_shape_str(inner)}, "
                f"got {_shape_str(arr.shape)}"
            )
        out = np.ascontiguousarray(arr, dtype=np.float64)[None]
        is_batch = False
    elif arr.ndim == len(inner) + 1:
        if tuple(arr.shape[1:]) != tuple(inner):
            raise ValueError(
                f"{name} has wrong shape: expected {_shape_str(inner)} or (N,) + {_shape_str(inner)}, "
                f"got {_shape_str(arr.shape)}"
            )
        out = np.ascontiguousarray(arr, dtype=np.float64)
        is_batch = True
    else:
        raise ValueError(
            f"{name} has wrong shape: expected {_shape_str(inner)} or (N,) + {_shape_str(inner)}, "
            f"got {_shape_str(arr.shape)}"
        )
    check_finite(name, out)
    return out, is_batch


def joint_mask(model, joints, name):
    """The joints ``joints`` of ``model`` as a bool per joint.

    Parameters
    ----------
    model : gear.Model
    joints : str, list, tuple or set of str, or array_like of bool
        Joint names (an empty list: no joint; one string: that joint), or a
        mask with one boolean (or 0/1) per joint, length ``model.nbodies``.
    name : str
        The argument's name, for the error messages.

    Returns
    -------
    ndarray of bool, shape (nbodies,)
        A new array, True on the named joints.

    Raises
    ------
    TypeError
        ``joints`` is None, or a list mixes names and other values.
    KeyError
        A name that is no joint of ``model`` (the message lists the joints).
    ValueError
        A mask of the wrong length, or with values other than 0 and 1.
    """
    nb = model.nbodies
    if joints is None:
        raise TypeError(f"{name} is required: a list of joint names (empty for none), one joint "
                        f"name, or a bool per joint (length {nb})")
    if isinstance(joints, (str, np.str_)):
        joints = [str(joints)]
    elif isinstance(joints, np.ndarray) and joints.dtype.kind == "U" and joints.ndim <= 1:
        joints = [str(j) for j in joints.ravel()]
    if isinstance(joints, (list, tuple, set, frozenset)):
        strs = [isinstance(j, (str, np.str_)) for j in joints]
        if all(strs):                        # names; an empty list is no joint
            mask = np.zeros(nb, dtype=bool)
            for j in joints:
                try:
                    mask[model.joint_names.index(j)] = True
                except ValueError:
                    raise KeyError(f"{name}: no joint named {j!r}; joints are {model.joint_names}") from None
            return mask
        if any(strs):
            raise TypeError(f"{name} mixes joint names and other values ({list(joints)!r}); pass "
                            f"joint names only, or a bool per joint (length {nb})")
        if isinstance(joints, (set, frozenset)):
            raise TypeError(f"{name} must be joint names or a bool per joint in order "
                            f"(length {nb}), got a set of {type(next(iter(joints))).__name__}")
    arr = _to_array(name, joints)
    if arr.shape != (nb,):
        raise ValueError(f"{name} has wrong shape: expected ({nb},) bools (one per joint), a list "
                         f"of joint names or one joint name, got shape {_shape_str(arr.shape)}")
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be joint names or a bool per joint, got dtype {arr.dtype}")
    if arr.dtype != bool and not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must hold booleans (or 0/1), one per joint; got {arr.tolist()}")
    return arr.astype(bool)
