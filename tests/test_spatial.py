"""Lie-group algebra of gear.spatial against its definitions (Kim Sec. 1).

Oracles: the 4x4 matrix forms (eqs. 3-6, 9), scipy.linalg.expm of the
se(3) matrix (eq. 5), kinetic-energy invariance (eqs. 15, 21) and the
explicit inertia formula (eq. 22).
"""
import numpy as np
import pytest
from scipy.linalg import expm

import gear
from gear import testing as gt
from gear.spatial import (SE3, Ad, Ad_star, Inertia, ad, ad_star, exp_se3, exp_so3, log_se3,
                          log_so3, quat_exp, quat_log, quat_mul, quat_to_rot, rot_to_quat, skew,
                          unskew)

N_RANDOM = 20


def rand_T(rng):
    return gt.random_se3(rng, scale=2.0)


def rand_V(rng):
    return rng.standard_normal(6)


# ---------------------------------------------------------------------------
# SE(3), Ad, Ad*
# ---------------------------------------------------------------------------
def test_skew_is_cross_product(rng):
    a, b = rng.standard_normal((2, 3))
    np.testing.assert_allclose(skew(a) @ b, np.cross(a, b), atol=1e-15)
    np.testing.assert_allclose(unskew(skew(a)), a, atol=0)


def test_se3_group_operations_match_4x4_matrices(rng):
    for _ in range(N_RANDOM):
        A, B = rand_T(rng), rand_T(rng)
        np.testing.assert_allclose((A * B).homogeneous(), A.homogeneous() @ B.homogeneous(), atol=1e-14)
        np.testing.assert_allclose((A @ B).homogeneous(), A.homogeneous() @ B.homogeneous(), atol=1e-14)
        # eq. (4)
        np.testing.assert_allclose(A.inverse().homogeneous(), np.linalg.inv(A.homogeneous()), atol=1e-13)
        x = rng.standard_normal((5, 3))
        hx = np.c_[x, np.ones(5)] @ A.homogeneous().T
        np.testing.assert_allclose(A.act(x), hx[:, :3], atol=1e-14)
        assert SE3.from_matrix(A.homogeneous()).isclose(A)


def test_se3_constructors():
    T = SE3.from_rpy([0.1, -0.2, 0.3], [1, 2, 3])
    Rz, Ry, Rx = exp_so3([0, 0, 0.3]), exp_so3([0, -0.2, 0]), exp_so3([0.1, 0, 0])
    np.testing.assert_allclose(T.R, Rz @ Ry @ Rx, atol=1e-15)
    np.testing.assert_array_equal(T.p, [1, 2, 3])
    q = quat_exp([0.3, -0.1, 0.2])
    np.testing.assert_allclose(SE3.from_quat(q).R, exp_so3([0.3, -0.1, 0.2]), atol=1e-15)
    assert SE3.identity().isclose(SE3(np.eye(3), np.zeros(3)))


def test_Ad_is_conjugation_eq6(rng):
    # Ad_T xi = T xi T^{-1} with 4x4 matrices (eq. 5, 6, 7)
    for _ in range(N_RANDOM):
        T, V = rand_T(rng), rand_V(rng)
        H = T.homogeneous()
        lhs = gt.se3_hat(Ad(T) @ V)
        np.testing.assert_allclose(lhs, H @ gt.se3_hat(V) @ np.linalg.inv(H), atol=1e-12)
        np.testing.assert_allclose(Ad(H), Ad(T), atol=0)
        np.testing.assert_allclose(T.Ad(), Ad(T), atol=0)


def test_Ad_of_product_is_product_of_Ads(rng):
    for _ in range(N_RANDOM):
        A, B = rand_T(rng), rand_T(rng)
        np.testing.assert_allclose(Ad(A * B), Ad(A) @ Ad(B), atol=1e-13)


def test_Ad_of_inverse_is_inverse_of_Ad(rng):
    for _ in range(N_RANDOM):
        T = rand_T(rng)
        np.testing.assert_allclose(Ad(T.inverse()), np.linalg.inv(Ad(T)), atol=1e-12)
        np.testing.assert_allclose(Ad(T.inverse()) @ Ad(T), np.eye(6), atol=1e-13)


def test_coadjoint_preserves_power(rng):
    # <Ad*_T F, V> = <F, Ad_T V>: wrenches transform dually to twists (eq. 8, 13)
    for _ in range(N_RANDOM):
        T, V, F = rand_T(rng), rand_V(rng), rand_V(rng)
        np.testing.assert_allclose(Ad_star(T), Ad(T).T, atol=0)
        assert np.isclose((Ad_star(T) @ F) @ V, F @ (Ad(T) @ V), rtol=1e-12, atol=1e-12)
        # F_b = Ad*_{T_ab} F_a and V_b = Ad_{T_ba} V_a leave the power unchanged
        Vb, Fb = Ad(T.inverse()) @ V, Ad_star(T) @ F
        assert np.isclose(Fb @ Vb, F @ V, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# ad, ad*
# ---------------------------------------------------------------------------
def test_ad_is_matrix_commutator(rng):
    for _ in range(N_RANDOM):
        X, Y = rand_V(rng), rand_V(rng)
        hX, hY = gt.se3_hat(X), gt.se3_hat(Y)
        np.testing.assert_allclose(gt.se3_hat(ad(X) @ Y), hX @ hY - hY @ hX, atol=1e-13)
        np.testing.assert_allclose(ad_star(X), ad(X).T, atol=0)


def test_ad_identities(rng):
    for _ in range(N_RANDOM):
        X, Y, Z = rand_V(rng), rand_V(rng), rand_V(rng)
        np.testing.assert_allclose(ad(X) @ X, 0, atol=1e-14)
        np.testing.assert_allclose(ad(X) @ Y, -ad(Y) @ X, atol=1e-14)
        jacobi = ad(X) @ ad(Y) @ Z + ad(Y) @ ad(Z) @ X + ad(Z) @ ad(X) @ Y
        np.testing.assert_allclose(jacobi, 0, atol=1e-12)
        T = rand_T(rng)
        np.testing.assert_allclose(Ad(T) @ ad(X) @ Ad(T.inverse()), ad(Ad(T) @ X), atol=1e-11)


def test_lemma1_and_lemma2_derivatives_of_Ad(rng):
    # Ad_{T^{-1}} d/dt Ad_T = ad_V and Ad*_T d/dt Ad*_{T^{-1}} = -ad*_V along
    # T(t) = T exp(t V) (proofs of Lemma 1, 2).
    T, V = rand_T(rng), rand_V(rng)
    h = 1e-6

    def Tt(t):
        return T * exp_se3(t * V)

    dAd = (Ad(Tt(h)) - Ad(Tt(-h))) / (2 * h)
    np.testing.assert_allclose(Ad(T.inverse()) @ dAd, ad(V), atol=1e-8)
    dAds = (Ad_star(Tt(h).inverse()) - Ad_star(Tt(-h).inverse())) / (2 * h)
    np.testing.assert_allclose(Ad_star(T) @ dAds, -ad_star(V), atol=1e-8)


# ---------------------------------------------------------------------------
# exp / log
# ---------------------------------------------------------------------------
ANGLES = [0.0, 1e-12, 1e-9, 1e-6, 1e-4 * (1 - 1e-9), 1e-4, 1e-4 * (1 + 1e-9), 3e-4, 1e-3, 1e-2,
          0.5, 2.0, 3.0, np.pi - 1e-3, np.pi - 1e-6, np.pi - 1e-9]


@pytest.mark.parametrize("theta", ANGLES)
def test_exp_so3_matches_expm_and_log_inverts(theta, rng):
    for _ in range(5):
        w = theta * gt.random_unit(rng)
        R = exp_so3(w)
        np.testing.assert_allclose(R, expm(skew(w)), rtol=0, atol=2e-15)
        np.testing.assert_allclose(R.T @ R, np.eye(3), atol=1e-15)
        # log is accurate relative to the angle, also for tiny angles
        np.testing.assert_allclose(log_so3(R), w, rtol=0, atol=1e-15 * max(theta, 1e-300) + 1e-300)


@pytest.mark.parametrize("theta", ANGLES)
def test_exp_se3_matches_expm_and_log_inverts(theta, rng):
    for _ in range(5):
        w = theta * gt.random_unit(rng)
        V = np.concatenate([w, rng.uniform(-2, 2, 3)])
        T = exp_se3(V)
        assert isinstance(T, SE3)
        np.testing.assert_allclose(T.homogeneous(), expm(gt.se3_hat(V)), rtol=0, atol=1e-14)
        np.testing.assert_allclose(log_se3(T), V, rtol=0, atol=1e-13)
        np.testing.assert_allclose(log_se3(T.homogeneous()), V, rtol=0, atol=1e-13)


def test_exp_se3_translation_is_accurate_just_above_taylor_switch(rng):
    # Regression: (1 - cos t) / t^2 computed directly lost ~8 digits at
    # t = 1e-4 .. 1e-3, putting ~1e-12 errors into the translation.
    for theta in (1e-4, 1.5e-4, 3e-4, 1e-3):
        for _ in range(5):
            V = np.concatenate([theta * gt.random_unit(rng), rng.uniform(-2, 2, 3)])
            np.testing.assert_allclose(exp_se3(V).p, expm(gt.se3_hat(V))[:3, 3], rtol=0, atol=2e-15)


def test_log_at_exactly_pi():
    for axis in np.eye(3).tolist() + [[1 / np.sqrt(2), 1 / np.sqrt(2), 0], [1, 1, 1]]:
        axis = np.asarray(axis, float) / np.linalg.norm(axis)
        w = np.pi * axis
        R = exp_so3(w)
        w2 = log_so3(R)
        assert np.isclose(np.linalg.norm(w2), np.pi, atol=1e-12)
        # either representative (w or -w) is a correct logarithm
        assert min(np.abs(w2 - w).max(), np.abs(w2 + w).max()) < 1e-12
        np.testing.assert_allclose(exp_so3(w2), R, atol=1e-14)
        V = np.concatenate([w, [0.3, -0.2, 0.5]])
        T = exp_se3(V)
        V2 = log_se3(T)
        np.testing.assert_allclose(exp_se3(V2).homogeneous(), T.homogeneous(), atol=1e-13)
        np.testing.assert_allclose(expm(gt.se3_hat(V2)), T.homogeneous(), atol=1e-13)


def test_log_of_big_rotation_is_in_principal_range(rng):
    w = 5.0 * gt.random_unit(rng)
    w2 = log_so3(exp_so3(w))
    assert np.linalg.norm(w2) <= np.pi
    np.testing.assert_allclose(exp_so3(w2), exp_so3(w), atol=1e-14)


def test_quaternions_agree_with_rotations(rng):
    for theta in (0.0, 1e-9, 1e-5, 0.7, 3.0, np.pi - 1e-7):
        w = theta * gt.random_unit(rng)
        qw = quat_exp(w)
        assert np.isclose(np.linalg.norm(qw), 1, atol=1e-15)
        np.testing.assert_allclose(quat_to_rot(qw), exp_so3(w), atol=1e-15)
        np.testing.assert_allclose(quat_log(qw), w, atol=1e-15 * max(1, theta))
        q2 = rot_to_quat(exp_so3(w))
        assert q2[0] >= 0
        np.testing.assert_allclose(quat_to_rot(q2), exp_so3(w), atol=1e-15)
    for _ in range(N_RANDOM):
        a, b = gt.random_unit(rng) * rng.uniform(0, 3), gt.random_unit(rng) * rng.uniform(0, 3)
        qa, qb = quat_exp(a), quat_exp(b)
        np.testing.assert_allclose(quat_to_rot(quat_mul(qa, qb)), exp_so3(a) @ exp_so3(b), atol=1e-14)
        # q and -q are the same rotation; log picks the short way
        np.testing.assert_allclose(quat_log(-qa), quat_log(qa), atol=1e-14)


# ---------------------------------------------------------------------------
# generalized inertia
# ---------------------------------------------------------------------------
def test_inertia_eq21_equals_eq22(rng):
    for _ in range(N_RANDOM):
        m = rng.uniform(0.5, 3)
        Ic = np.diag(gt.random_inertia(rng).I_com.diagonal())  # principal, in the COM frame
        T_bc = gt.random_se3(rng)                               # COM frame {C} seen from body {B}
        R, p = T_bc.R, T_bc.p
        I_c = np.zeros((6, 6))
        I_c[:3, :3] = Ic
        I_c[3:, 3:] = m * np.eye(3)
        # eq. (21): I_b = Ad*_{T_cb} I_c Ad_{T_cb}, T_cb = T_bc^{-1}
        A = Ad(T_bc.inverse())
        I21 = A.T @ I_c @ A
        # eq. (22)
        P = skew(p)
        I22 = np.block([[R @ Ic @ R.T + m * P.T @ P, m * P], [m * P.T, m * np.eye(3)]])
        np.testing.assert_allclose(I21, I22, atol=1e-13)
        np.testing.assert_allclose(Inertia(m, p, R @ Ic @ R.T).matrix(), I22, atol=1e-13)


def test_inertia_matrix_is_symmetric_positive_definite(rng):
    for _ in range(N_RANDOM):
        M = gt.random_inertia(rng).matrix()
        np.testing.assert_allclose(M, M.T, atol=0)
        assert np.linalg.eigvalsh(M).min() > 0


def test_inertia_transform_is_coadjoint_congruence(rng):
    for _ in range(N_RANDOM):
        I, T = gt.random_inertia(rng), rand_T(rng)
        A = Ad(T.inverse())
        np.testing.assert_allclose(I.transform(T).matrix(), A.T @ I.matrix() @ A, atol=1e-12)
        np.testing.assert_allclose(I.transform(T.homogeneous()).matrix(), A.T @ I.matrix() @ A, atol=1e-12)
        # kinetic energy does not depend on the frame (eq. 15, 21)
        Va = rand_V(rng)
        Vb = Ad(T) @ Va        # the same motion seen in the transformed frame
        ea = 0.5 * Va @ I.matrix() @ Va
        eb = 0.5 * Vb @ I.transform(T).matrix() @ Vb
        assert np.isclose(ea, eb, rtol=1e-12)
        # transforming back is the identity
        back = I.transform(T).transform(T.inverse())
        np.testing.assert_allclose(back.matrix(), I.matrix(), atol=1e-12)


def test_inertia_ten_parameter_round_trip(rng):
    for _ in range(N_RANDOM):
        I = gt.random_inertia(rng)
        p = I.to_params()
        assert p.shape == (10,)
        J = Inertia.from_params(p)
        np.testing.assert_allclose(J.matrix(), I.matrix(), atol=1e-13)
        np.testing.assert_allclose(J.to_params(), p, atol=1e-13)
        assert p[0] == I.mass
        np.testing.assert_allclose(p[1:4], I.mass * I.com, atol=1e-15)
        Io = I.I_origin()
        np.testing.assert_allclose(p[4:], [Io[0, 0], Io[1, 1], Io[2, 2], Io[0, 1], Io[0, 2], Io[1, 2]])
        np.testing.assert_allclose(I.matrix()[:3, :3], Io, atol=1e-15)


def test_inertia_lumping_adds_kinetic_energies(rng):
    for _ in range(N_RANDOM):
        I1 = gt.random_inertia(rng)
        I2 = gt.random_inertia(rng).transform(rand_T(rng))
        L = I1 + I2
        assert np.isclose(L.mass, I1.mass + I2.mass)
        np.testing.assert_allclose(L.com, (I1.mass * I1.com + I2.mass * I2.com) / L.mass, atol=1e-15)
        np.testing.assert_allclose(L.matrix(), I1.matrix() + I2.matrix(), atol=1e-13)
        V = rand_V(rng)
        e = 0.5 * V @ L.matrix() @ V
        assert np.isclose(e, 0.5 * V @ I1.matrix() @ V + 0.5 * V @ I2.matrix() @ V, rtol=1e-12)
    with pytest.raises(TypeError):
        I1 + 1.0


def test_point_mass_is_valid():
    I = Inertia.point_mass(2.0, [0.1, 0.2, 0.3])
    np.testing.assert_array_equal(I.I_com, np.zeros((3, 3)))
    assert np.linalg.eigvalsh(I.matrix()).min() > -1e-12          # semidefinite
    np.testing.assert_allclose(I.I_origin(), 2.0 * skew([0.1, 0.2, 0.3]).T @ skew([0.1, 0.2, 0.3]),
                               atol=1e-11)


def test_random_inertia_is_physical(rng):
    for _ in range(50):
        I = gt.random_inertia(rng)
        e = np.linalg.eigvalsh(I.I_com)
        assert e.min() > 0 and e.max() <= e.sum() - e.max()


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("mass", [-1.0, -1e-300, np.nan, np.inf])
def test_inertia_rejects_bad_mass(mass):
    with pytest.raises(ValueError, match="mass"):
        Inertia(mass, [0, 0, 0], np.eye(3))


def test_massless_inertia_is_a_frame():
    I = Inertia(0.0, [0.1, 0, 0], np.zeros((3, 3)))
    assert I.is_massless
    assert not Inertia(1.0).is_massless
    np.testing.assert_array_equal(I.matrix(), np.zeros((6, 6)))
    # lumping massless inertias keeps them massless, and adds nothing to others
    assert (I + I).is_massless
    J = Inertia(2.0, [0, 0.1, 0], np.diag([0.1, 0.2, 0.25]))
    np.testing.assert_allclose((J + I).matrix(), J.matrix(), atol=1e-15)


def test_rotational_inertia_without_mass_warns():
    with pytest.warns(gear.InertiaWarning, match="zero mass"):
        I = Inertia(0.0, [0, 0, 0], np.eye(3) * 1e-3, name="sensor")
    assert not I.is_massless
    with pytest.raises(ValueError, match="zero mass"):
        Inertia(0.0, [0, 0, 0], np.eye(3) * 1e-3, strict=True)


def test_inertia_rejects_non_number_mass():
    with pytest.raises(TypeError, match="mass"):
        Inertia("heavy", [0, 0, 0], np.eye(3))


@pytest.mark.parametrize("I_com, message", [
    ([[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "symmetric"),
    (np.diag([-1.0, -1.0, -0.1]), "negative definite"),
    (np.diag([-1.0, 0.0, 0.0]), "negative definite"),
    ([[np.nan, 0, 0], [0, 1, 0], [0, 0, 1]], "I_com.*non-finite"),
    (np.eye(2), "I_com.*shape"),
])
def test_inertia_rejects_bad_rotational_inertia(I_com, message):
    with pytest.raises(ValueError, match=message):
        Inertia(1.0, [0, 0, 0], I_com)


def test_semidefinite_and_rounding_level_inertias_are_valid():
    # a thin rod (one zero principal moment) and a point mass
    for I_com in (np.diag([1.0, 1.0, 0.0]), np.zeros((3, 3))):
        np.testing.assert_array_equal(Inertia(1.0, [0, 0, 0], I_com).I_com, I_com)
    # hyq's base_link (example-robot-data): moments [-2e-22, 8.5e-23, 3e-6]
    R = gt.random_rotation(np.random.default_rng(0))
    I_com = R @ np.diag([-2e-22, 8.5e-23, 3e-6]) @ R.T
    # (one non-zero moment also violates the triangle inequality: a warning)
    with pytest.warns(gear.InertiaWarning, match="triangle"):
        I = Inertia(1.0, [0, 0, 0], I_com)
    # semidefinite up to the eigensolver's own rounding (eps times the
    # largest moment: the clipped -2e-22 is below it, and whether the
    # recomposed matrix then reads -4e-22 or +1e-23 depends on the BLAS)
    e = np.linalg.eigvalsh(I.I_com)
    assert e.min() >= -4 * np.finfo(float).eps * e.max()
    np.testing.assert_allclose(I.I_com, I_com, atol=1e-21)
    # a negative moment of 1e-12 beside moments of 1 is rounding to the
    # loader (below 1e-9 of the largest) and far above the eigensolver's:
    # clipped, it reads as zero to 1e-15
    I_com = R @ np.diag([-1e-12, 1.0, 1.0]) @ R.T
    e = np.linalg.eigvalsh(Inertia(1.0, [0, 0, 0], I_com).I_com)
    assert abs(e.min()) <= 1e-15 and np.allclose(e[1:], 1.0)


@pytest.mark.parametrize("moments", [[1.0, 1.0, -0.1], [1.0, 1.0, -1e-6]])
def test_indefinite_inertia_warns_or_raises_with_strict(moments):
    with pytest.warns(gear.InertiaWarning, match="indefinite"):
        I = Inertia(1.0, [0, 0, 0], np.diag(moments))
    np.testing.assert_array_equal(I.I_com, np.diag(moments))          # used as given
    with pytest.raises(ValueError, match="indefinite"):
        Inertia(1.0, [0, 0, 0], np.diag(moments), strict=True)


def test_triangle_inequality_warns_or_raises_with_strict():
    with pytest.warns(gear.InertiaWarning, match="triangle inequality"):
        I = Inertia(1.0, [0, 0, 0], np.diag([1.0, 0.1, 0.1]))
    np.testing.assert_array_equal(I.I_com, np.diag([1.0, 0.1, 0.1]))   # used as given
    with pytest.raises(ValueError, match="triangle inequality"):
        Inertia(1.0, [0, 0, 0], np.diag([1.0, 0.1, 0.1]), strict=True)


def test_inertia_errors_name_the_body():
    with pytest.warns(gear.InertiaWarning, match="'forearm'.*triangle"):
        Inertia(1.0, [0, 0, 0], np.diag([1.0, 0.1, 0.1]), name="forearm")
    with pytest.raises(ValueError, match="'forearm'.*triangle"):
        Inertia(1.0, [0, 0, 0], np.diag([1.0, 0.1, 0.1]), name="forearm", strict=True)
    with pytest.raises(ValueError, match="'forearm'.*negative definite"):
        Inertia(1.0, [0, 0, 0], np.diag([-1.0, -1.0, -0.5]), name="forearm")
    with pytest.raises(ValueError, match="com"):
        Inertia(1.0, [0, np.inf, 0], np.eye(3))
    with pytest.raises(TypeError, match="com"):
        Inertia(1.0, ["a", "b", "c"], np.eye(3))


def test_from_params_rejects_bad_parameters():
    with pytest.raises(ValueError, match="mass"):
        Inertia.from_params([-1.0] + [0.0] * 9)
    with pytest.raises(ValueError, match="mass"):
        Inertia.from_params([0.0, 0.1, 0, 0] + [0.0] * 6)       # first moment without mass
    assert Inertia.from_params([0.0] * 10).is_massless
    with pytest.warns(gear.InertiaWarning, match="triangle"):
        Inertia.from_params([1.0, 0, 0, 0, 1.0, 0.1, 0.1, 0, 0, 0])
    with pytest.raises(ValueError, match="negative definite"):
        Inertia.from_params([1.0, 0, 0, 0, -1.0, -1.0, -1.0, 0, 0, 0])
    with pytest.raises(ValueError, match="params"):
        Inertia.from_params([1.0, 2.0])


@pytest.mark.parametrize("R", [
    2.0 * np.eye(3),                       # scaled
    np.diag([1.0, 1.0, -1.0]),             # reflection, det = -1
    np.array([[1.0, 0.1, 0], [0, 1, 0], [0, 0, 1]]),  # sheared
])
def test_se3_rejects_non_rotation(R):
    with pytest.raises(ValueError, match="rotation"):
        SE3(R, [0, 0, 0])


def test_se3_rejects_bad_shapes_and_values():
    with pytest.raises(ValueError, match="R has wrong shape"):
        SE3(np.eye(2))
    with pytest.raises(ValueError, match="p has wrong shape"):
        SE3(np.eye(3), [1.0, 2.0])
    with pytest.raises(ValueError, match="p contains non-finite"):
        SE3(np.eye(3), [1.0, np.nan, 0])
    with pytest.raises(TypeError, match="R must be a real"):
        SE3(np.eye(3, dtype=complex))
    with pytest.raises(ValueError, match="T has wrong shape"):
        SE3.from_matrix(np.eye(3))


def test_exp_log_reject_bad_input():
    with pytest.raises(ValueError, match="w has wrong shape"):
        exp_so3([1.0, 2.0])
    with pytest.raises(ValueError, match="V contains non-finite"):
        exp_se3([0, 0, np.nan, 0, 0, 0])
    with pytest.raises(ValueError, match="V has wrong shape"):
        ad(np.zeros(5))
    with pytest.raises(ValueError, match="R has wrong shape"):
        log_so3(np.eye(4))


def test_public_reexports():
    assert gear.SE3 is SE3 and gear.Inertia is Inertia


def test_docs_examples_run():
    import doctest
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "docs" / "spatial.md"
    res = doctest.testfile(str(path), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


def test_block_congruence_kernel_matches_dense_formula():
    """The block-structured Ad*_{T^-1} P Ad_{T^-1} of the ABA kernel (eq. 49)
    equals the dense 6x6 product and the NumPy Ad matrices."""
    from gear import _core
    from gear.testing import random_se3

    rng = np.random.default_rng(12)
    for _ in range(20):
        T = random_se3(rng)
        A = rng.standard_normal((6, 6))
        P = A @ A.T
        fast, dense = _core._check_congruence(np.concatenate([T.R.ravel(), T.p]), P)
        X = gear.spatial.Ad(T.inverse())
        assert np.allclose(fast, dense, rtol=1e-13, atol=1e-13)
        assert np.allclose(fast, X.T @ P @ X, rtol=1e-13, atol=1e-13)
        assert np.array_equal(fast, fast.T)
