"""Classic closed-chain mechanisms, ready to use.

Every builder returns ``(sys, q0)``: a :class:`gear.ConstrainedModel` (with
the ``"kkt"`` solver) and an assembled configuration ``q0`` (constraint
residual below 1e-12).  Links are uniform bars (aluminium-like density,
10 mm radius) with their ``x`` axis along the bar.  Planar mechanisms move
in the world x-z plane (joint axes ``-y``, so positive angles turn ``x``
towards ``+z``) under gravity ``-z``.

====================  =============================================  =====  =======
builder               what                                           dof    Grübler
====================  =============================================  =====  =======
:func:`four_bar`      planar crank-rocker, ball closure              1      0
:func:`slider_crank`  crank, connecting rod, slider on x             1      0
:func:`five_bar`      two cranks, two links meeting at a ball        2      1
:func:`n_four_bar`    IFToMM chain of ``n`` parallelogram four-bars  1      1 - n
:func:`rssr`          spatial R-S-S-R linkage                        2 (*)  2
:func:`stewart`       6-UPS Gough-Stewart platform                   6      6
:func:`bricard`       orthogonal Bricard 6R linkage                  1      0
:func:`rolling_ball`  sphere rolling without slip (nonholonomic)     3      3
====================  =============================================  =====  =======

(The planar mechanisms are closed by 3-row ball closures, one of whose rows
is redundant in the plane: their Grübler count ``nv - nc`` is lower than
their mobility.  (*) The RSSR's second freedom is the coupler's idle spin
about its own axis.)
"""
from __future__ import annotations

import numpy as np

from . import joints as J
from .constraints import ConstrainedModel, CustomConstraint, LoopClosure
from .model import Model
from .spatial import SE3, Inertia, skew

__all__ = ["four_bar", "slider_crank", "five_bar", "n_four_bar", "rssr", "stewart", "bricard",
           "rolling_ball"]

_RHO = 2700.0 * np.pi * 0.01**2      # kg per metre of a 10 mm-radius aluminium bar
_AXIS = (0.0, -1.0, 0.0)             # planar joints: positive angle turns x towards +z


def _bar(length, axis=0):
    """Inertia of a uniform bar along body ``x`` (or ``axis``) from its origin."""
    m = _RHO * length
    r = 0.01
    Ia, It = 0.5 * m * r * r, m * (3 * r * r + length * length) / 12.0
    d = np.full(3, It)
    d[axis] = Ia
    com = np.zeros(3)
    com[axis] = 0.5 * length
    return Inertia(m, com, np.diag(d))


def _pos(length):
    return SE3(p=[length, 0.0, 0.0])


def _circle_intersection(P, r1, Q, r2, upper=True):
    """A point at distance r1 from P and r2 from Q (2-D), or ValueError."""
    d = np.linalg.norm(Q - P)
    if d > r1 + r2 or d < abs(r1 - r2) or d == 0.0:
        raise ValueError(f"the links cannot close: distance {d:.4g} with link lengths "
                         f"{r1:.4g} and {r2:.4g}")
    a = (r1 * r1 - r2 * r2 + d * d) / (2 * d)
    h = np.sqrt(max(r1 * r1 - a * a, 0.0))
    e = (Q - P) / d
    n = np.array([-e[1], e[0]])
    return P + a * e + (h if upper else -h) * n


def _ang(v):
    return float(np.arctan2(v[1], v[0]))


def _finish(model, closures, q_guess):
    sysm = ConstrainedModel(model, closures)
    return sysm, sysm.assemble(q_guess)


def four_bar(crank=0.2, coupler=0.5, rocker=0.4, ground=0.6, angle=np.pi / 3, closure="ball"):
    """Planar four-bar linkage (crank, coupler, rocker; ground pivots at
    ``(0, 0)`` and ``(ground, 0)`` in the x-z plane).

    With the defaults this is the command line's ``four-bar``: 0.9331 kg
    (10 mm-radius aluminium bars), joints ``"crank"``, ``"coupler"``,
    ``"rocker"`` about ``-y``, closed by the ball ``"ground_pivot"``.  It is
    *not* the bundled model file ``fourbar.xml`` (the command line's
    ``fourbar``, used by the demo): that one has the same link lengths and
    starting pose but 20 x 10 mm bars (0.594 kg), a ground pivot at
    ``(0.583, 0, -0.097)``, joints ``"crank_joint"``, ``"coupler_joint"``,
    ``"rocker_joint"`` about ``+y``, and comes through
    :func:`gear.load_mjcf` to show the MJCF loader's ``<equality>``
    constraints.  This builder exists for its parameters (link lengths,
    crank angle, closure kind) and returns an assembled system; the two
    need different crank torques for the same motion.

    Parameters
    ----------
    crank, coupler, rocker, ground : float
        Link lengths (m).
    angle : float
        Crank angle of the returned configuration (rad, from +x).
    closure : {"ball", "revolute"}
        How the rocker's tip is pinned to the ground pivot: a 3-row ball
        (one redundant row in the plane) or a 5-row revolute about ``-y``
        (three redundant rows).

    Returns
    -------
    sys : gear.ConstrainedModel
        Joints ``"crank"``, ``"coupler"``, ``"rocker"``.
    q0 : ndarray, shape (3,)
    """
    if closure not in ("ball", "revolute"):
        raise ValueError(f"closure must be 'ball' or 'revolute', got {closure!r}")
    m = Model()
    m.add_body("crank", "world", J.Revolute(_AXIS), inertia=_bar(crank))
    m.add_body("coupler", "crank", J.Revolute(_AXIS), placement=_pos(crank), inertia=_bar(coupler))
    m.add_body("rocker", "coupler", J.Revolute(_AXIS), placement=_pos(coupler), inertia=_bar(rocker))
    B = crank * np.array([np.cos(angle), np.sin(angle)])
    D = np.array([ground, 0.0])
    C = _circle_intersection(B, coupler, D, rocker)
    a1 = angle
    a2 = _ang(C - B)
    a3 = _ang(D - C)
    q = np.array([a1, a2 - a1, a3 - a2])
    pivot = SE3(p=[ground, 0.0, 0.0])
    if closure == "revolute":
        # frame z axes along the joint axis -y
        Rz = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])   # z -> -y
        c = LoopClosure("rocker", SE3(Rz, [rocker, 0, 0]), "world", SE3(Rz, pivot.p), "revolute",
                        name="ground_pivot")
    else:
        c = LoopClosure("rocker", _pos(rocker), "world", pivot, "ball", name="ground_pivot")
    return _finish(m, [c], q)


def slider_crank(crank=0.1, rod=0.3, angle=np.pi / 4):
    """Planar slider-crank: crank at the origin, connecting rod, slider on
    the x axis (prismatic joint ``"slider"``), rod tip pinned to the slider.

    Returns
    -------
    sys, q0
        Joints ``"crank"``, ``"rod"``, ``"slider"``.
    """
    if rod <= crank:
        raise ValueError(f"rod ({rod}) must be longer than crank ({crank})")
    m = Model()
    m.add_body("crank", "world", J.Revolute(_AXIS), inertia=_bar(crank))
    m.add_body("rod", "crank", J.Revolute(_AXIS), placement=_pos(crank), inertia=_bar(rod))
    m.add_body("slider", "world", J.Prismatic([1.0, 0.0, 0.0]),
               inertia=Inertia(0.5, [0, 0, 0], np.diag([1e-4, 1e-4, 1e-4])))
    B = crank * np.array([np.cos(angle), np.sin(angle)])
    x = B[0] + np.sqrt(rod * rod - B[1] ** 2)
    q = np.array([angle, _ang(np.array([x, 0.0]) - B) - angle, x])
    c = LoopClosure("rod", _pos(rod), "slider", None, "ball", name="wrist_pin")
    return _finish(m, [c], q)


def five_bar(l1=0.25, l2=0.4, l3=0.4, l4=0.25, ground=0.3, angles=(2.0, 1.1)):
    """Planar five-bar: cranks ``"left"`` (pivot at the origin) and
    ``"right"`` (pivot at ``(ground, 0)``), links ``"left_link"`` and
    ``"right_link"`` whose tips are pinned together (2 degrees of freedom).

    Returns
    -------
    sys, q0
    """
    m = Model()
    m.add_body("left", "world", J.Revolute(_AXIS), inertia=_bar(l1))
    m.add_body("left_link", "left", J.Revolute(_AXIS), placement=_pos(l1), inertia=_bar(l2))
    m.add_body("right", "world", J.Revolute(_AXIS), placement=SE3(p=[ground, 0, 0]), inertia=_bar(l4))
    m.add_body("right_link", "right", J.Revolute(_AXIS), placement=_pos(l4), inertia=_bar(l3))
    A = l1 * np.array([np.cos(angles[0]), np.sin(angles[0])])
    E = np.array([ground, 0.0]) + l4 * np.array([np.cos(angles[1]), np.sin(angles[1])])
    P = _circle_intersection(A, l2, E, l3)
    q = np.array([angles[0], _ang(P - A) - angles[0], angles[1], _ang(P - E) - angles[1]])
    c = LoopClosure("left_link", _pos(l2), "right_link", _pos(l3), "ball", name="tip")
    return _finish(m, [c], q)


def n_four_bar(n, length=1.0, angle=np.pi / 3, tree="chain"):
    """The IFToMM N-four-bar benchmark: ``n + 1`` cranks of ``length``
    pivoted on the ground at ``x = k length``, their tips joined by ``n``
    couplers (a chain of ``n`` parallelogram four-bars, 1 degree of freedom).

    Parameters
    ----------
    n : int
        Number of four-bars (``>= 1``).
    length : float
        Length of every bar (m).
    angle : float
        Crank angle of the returned configuration.
    tree : {"chain", "ground"}
        The spanning tree, i.e. which joints are tree joints and which
        are cut into ball closures.  The mechanism, its motion and its
        forces are the same; the cost of reduced-coordinate solvers is not.

        - ``"chain"`` (default): ``crank0 -> coupler1 -> crank1 ->
          coupler2 -> ...`` (crank ``k`` hangs from the end of coupler
          ``k``, pointing to the ground), each crank ``k >= 1`` pinned to
          its ground pivot by a ball closure.  A ``2 n + 1``-deep chain: its
          mass matrix is dense.
        - ``"ground"``: every crank pivoted on the ground, coupler ``k``
          hanging from the tip of crank ``k - 1`` and pinned to the tip of
          crank ``k`` by a ball closure.  A tree two deep, the model a
          MuJoCo or Pinocchio user would write; its mass matrix is sparse.

    Returns
    -------
    sys, q0
        ``nv = 2 n + 1``, ``nc = 3 n``.  With ``tree="chain"`` ``q0`` is
        ``(crank0, coupler1, crank1, ...)`` (relative angles); with
        ``tree="ground"`` it is the ``n + 1`` crank angles, then the ``n``
        couplers' angles relative to their cranks.

    Examples
    --------
    >>> import gear
    >>> a, qa = gear.mechanisms.n_four_bar(3)
    >>> b, qb = gear.mechanisms.n_four_bar(3, tree="ground")
    >>> a.model.nv == b.model.nv == 7, a.nc == b.nc == 9
    (True, True)
    >>> m = b.model
    >>> [m.parents[m.body_index(k)] for k in ("crank3", "coupler3")] == [-1, m.body_index("crank2")]
    True
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if tree not in ("chain", "ground"):
        raise ValueError(f"tree must be 'chain' or 'ground', got {tree!r}")
    L = float(length)
    m = Model()
    closures = []
    if tree == "ground":
        q = [angle] * (n + 1) + [-angle] * n       # cranks absolute, couplers horizontal
        for k in range(n + 1):
            m.add_body(f"crank{k}", "world", J.Revolute(_AXIS), placement=SE3(p=[k * L, 0, 0]),
                       inertia=_bar(L))
        for k in range(1, n + 1):
            m.add_body(f"coupler{k}", f"crank{k - 1}", J.Revolute(_AXIS), placement=_pos(L),
                       inertia=_bar(L))
            closures.append(LoopClosure(f"coupler{k}", _pos(L), f"crank{k}", _pos(L), "ball",
                                        name=f"pin{k}"))
        return _finish(m, closures, np.array(q))
    m.add_body("crank0", "world", J.Revolute(_AXIS), inertia=_bar(L))
    # absolute angles: cranks theta (crank0) or theta + pi (pointing down to
    # their pivot from the coupler's end), couplers 0 (horizontal)
    q = [angle]
    parent = "crank0"
    tip = _pos(L)
    for k in range(1, n + 1):
        m.add_body(f"coupler{k}", parent, J.Revolute(_AXIS), placement=tip, inertia=_bar(L))
        m.add_body(f"crank{k}", f"coupler{k}", J.Revolute(_AXIS), placement=_pos(L), inertia=_bar(L))
        q.append(-angle if k == 1 else -(angle + np.pi))     # coupler relative to its parent
        q.append(angle + np.pi)                              # crank relative to the coupler
        closures.append(LoopClosure(f"crank{k}", _pos(L), "world", SE3(p=[k * L, 0, 0]), "ball",
                                    name=f"pivot{k}"))
        parent, tip = f"crank{k}", SE3()
    q = np.array(q)
    return _finish(m, closures, q)


def rssr(crank=0.1, coupler=None, rocker=0.15, output=(0.3, 0.0, 0.2), angle=0.5):
    """Spatial RSSR linkage: an input crank about the world ``z`` axis at the
    origin (joint ``"crank"``), a coupler on a spherical joint at the crank
    tip (``"coupler"``), and an output rocker about the world ``y`` axis at
    ``output`` (``"rocker"``); the coupler's far end is tied to the rocker's
    tip by a ball closure.

    Parameters
    ----------
    crank, rocker : float
        Arm lengths.
    coupler : float, optional
        Coupler length; default: the length that closes the loop with both
        arms at angle 0.
    output : array_like, shape (3,)
        Position of the output pivot.
    angle : float
        Input angle of the returned configuration.

    Returns
    -------
    sys, q0
        ``nv = 5`` (1 + 3 + 1), ``nc = 3``; mobility 2 (the input and the
        coupler's idle spin about its axis).
    """
    out = np.asarray(output, dtype=float)
    A0 = np.array([crank, 0.0, 0.0])
    B0 = out + np.array([rocker, 0.0, 0.0])
    L0 = float(np.linalg.norm(B0 - A0))
    b = L0 if coupler is None else float(coupler)
    m = Model()
    m.add_body("crank", "world", J.Revolute([0, 0, 1]), inertia=_bar(crank))
    m.add_body("coupler", "crank", J.Spherical(), placement=_pos(crank), inertia=_bar(b))
    m.add_body("rocker", "world", J.Revolute([0, 1, 0]), placement=SE3(p=out), inertia=_bar(rocker))
    # coupler's x axis along A0 -> B0 at the reference pose
    x = (B0 - A0) / L0
    z = np.cross(x, [0.0, 1.0, 0.0])
    z /= np.linalg.norm(z)
    R = np.column_stack([x, np.cross(z, x), z])
    from .spatial import rot_to_quat

    q = np.concatenate([[0.0], rot_to_quat(R), [0.0]])
    c = LoopClosure("coupler", _pos(b), "rocker", _pos(rocker), "ball", name="output_ball")
    sysm = ConstrainedModel(m, [c])
    q = sysm.assemble(q)
    g = q.copy()
    g[0] = angle
    return sysm, sysm.assemble(g, locked=["crank"])


def stewart(base_radius=1.0, platform_radius=0.5, height=1.0, spread=0.2, legs_massless=False):
    """6-UPS Gough-Stewart platform: six legs, each a universal joint at the
    base, a prismatic joint along the leg (``"leg{i}_slide"``, its
    coordinate is the leg length) and a ball at the platform; the platform
    is a free body (joint ``"platform"``), 6 degrees of freedom.

    Parameters
    ----------
    base_radius, platform_radius, height : float
    spread : float
        Half-angle (rad) between the two attachment points of a pair.
    legs_massless : bool
        Massless legs (two-force members: the statics have a closed form;
        inverse dynamics works, forward dynamics is singular).

    Returns
    -------
    sys, q0
        ``nv = 24``, ``nc = 18``.
    """
    m = Model()
    m.add_body("platform", "world", J.Free(),
               inertia=Inertia(10.0, [0, 0, 0], np.diag([0.6, 0.6, 1.2])))
    q = [0.0, 0.0, height, 1.0, 0.0, 0.0, 0.0]
    closures = []
    for i in range(6):
        k = i // 2
        s = -1 if i % 2 == 0 else 1
        tb = 2 * np.pi * k / 3 + s * spread
        tp = 2 * np.pi * k / 3 + s * (np.pi / 3 - spread)
        b = base_radius * np.array([np.cos(tb), np.sin(tb), 0.0])
        p_local = platform_radius * np.array([np.cos(tp), np.sin(tp), 0.0])
        P = p_local + [0.0, 0.0, height]
        e = (P - b) / np.linalg.norm(P - b)
        x = np.cross([0.0, 0.0, 1.0], e)
        x /= np.linalg.norm(x)
        R = np.column_stack([x, np.cross(e, x), e])
        m.add_body(f"leg{i}_lower", "world", J.Universal([1, 0, 0], [0, 1, 0]),
                   placement=SE3(R, b), inertia=None if legs_massless else _bar(0.5, axis=2),
                   joint_name=f"leg{i}_base")
        m.add_body(f"leg{i}_upper", f"leg{i}_lower", J.Prismatic([0, 0, 1]),
                   inertia=None if legs_massless else
                   Inertia(0.3, [0, 0, -0.25], np.diag([6e-3, 6e-3, 1e-4])),
                   joint_name=f"leg{i}_slide")
        q += [0.0, 0.0, float(np.linalg.norm(P - b))]
        closures.append(LoopClosure(f"leg{i}_upper", None, "platform", SE3(p=p_local), "ball",
                                    name=f"leg{i}_top"))
    return _finish(m, closures, np.array(q))


def bricard(a=0.3, angle=0.2):
    """Orthogonal (threefold-symmetric) Bricard 6R linkage: six equal links
    of length ``a``, consecutive joint axes perpendicular (twist pi/2), no
    offsets.  An overconstrained loop: Grübler 0 (5 coordinates, 5 rows of
    the ``"revolute"`` closure that stands for the sixth joint), real
    mobility 1.  Its configurations are ``(t, -p, -t, p, t)`` with ``p``
    a function of ``t``.

    Parameters
    ----------
    a : float
        Link length.
    angle : float
        Angle ``t`` of joint 1 in the returned configuration (about -0.3 to
        0.3 stays on the branch assembled here).

    Returns
    -------
    sys, q0
    """
    Rx = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])          # Rot_x(pi/2)
    link = SE3(p=[a, 0, 0]) * SE3(Rx)
    m = Model()
    parent = "world"
    for k in range(1, 6):
        m.add_body(f"link{k}", parent, J.Revolute([0, 0, 1]),
                   placement=None if k == 1 else link, inertia=_bar(a))
        parent = f"link{k}"
    # joint 6: the frame at the end of link 5 turns about the z axis of the
    # ground frame G, with joint 1's frame = G * link
    c = LoopClosure("link5", link, "world", link.inverse(), "revolute", name="joint6")
    sysm = ConstrainedModel(m, [c])
    guess = np.array([angle, -2.09, -angle, 2.09, angle])
    return sysm, sysm.assemble(guess, locked=["link1"])


def rolling_ball(radius=0.1, mass=1.0):
    """A sphere rolling without slipping on the plane ``z = 0``: a free body
    (joint ``"ball"``) and a nonholonomic :class:`gear.CustomConstraint`
    (contact point at rest: ``R v + r e_z x (R w) = 0`` with the body twist
    ``(w, v)``; Carius' primer Sec. 6.1).

    Returns
    -------
    sys, q0
        ``q0`` puts the centre at height ``radius``.
    """
    r = float(radius)
    m = Model()
    I = 0.4 * mass * r * r
    m.add_body("ball", "world", J.Free(), inertia=Inertia(mass, [0, 0, 0], np.eye(3) * I))
    ez = np.array([0.0, 0.0, 1.0])

    def rot(q):
        w, x, y, z = q[3:7]
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                         [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                         [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])

    def jac(q):
        R = rot(q)
        return np.hstack([r * skew(ez) @ R, R])          # rows on (w, v)

    def bias(q, dq):
        # d/dt A = [r [e_z] R [w], R [w]] with dR/dt = R [w]; [w] w = 0
        return rot(q) @ np.cross(dq[:3], dq[3:])

    c = CustomConstraint(jac, bias, residual=None, name="no_slip")
    sysm = ConstrainedModel(m, [c])
    return sysm, np.array([0.0, 0.0, r, 1.0, 0.0, 0.0, 0.0])
