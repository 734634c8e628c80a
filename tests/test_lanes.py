"""The structure-of-arrays ("lane") kernels: batches run ``LANES`` states
at once through vector arithmetic (gear/spatial/_lanes.pxd) and must give
what one state at a time gives, bit for bit, on every joint kind, at every
batch size (whole blocks and the states left over), with and without
velocities and external wrenches, on one thread and on several."""
import numpy as np
import pytest

import gear
from gear.testing import ALL_KINDS, random_tree


@pytest.fixture
def threads():
    old = gear.get_num_threads()
    yield gear.set_num_threads
    gear.set_num_threads(old)


def _single(model, q, dq, ddq, fe):
    return np.array([gear.inverse_dynamics(model, q[k], dq[k], ddq[k], None if fe is None else fe[k])
                     for k in range(len(q))])


@pytest.mark.parametrize("kind", ALL_KINDS)
def test_rnea_batch_equals_single_states_on_every_joint_kind(kind):
    rng = np.random.default_rng(ALL_KINDS.index(kind))
    model = random_tree(rng, nbodies=7, kinds=[kind, "revolute"])
    for N in (1, 3, 4, 5, 8, 11):
        q = model.random_configuration(rng, n=N)
        dq, ddq = rng.standard_normal((2, N, model.nv))
        fe = rng.standard_normal((N, model.nbodies, 6))
        for f in (None, fe):
            got = gear.inverse_dynamics(model, q, dq, ddq, f)
            assert np.array_equal(got, _single(model, q, dq, ddq, f)), (kind, N)


def test_rnea_batch_equals_single_states_on_trees_of_every_kind(threads):
    rng = np.random.default_rng(7)
    for seed, root_free in ((1, False), (2, True), (3, False)):
        model = random_tree(np.random.default_rng(seed), nbodies=14, root_free=root_free)
        q = model.random_configuration(rng, n=70)
        dq, ddq = rng.standard_normal((2, 70, model.nv))
        ref = _single(model, q, dq, ddq, None)
        for n in (1, 2):
            threads(n)
            assert np.array_equal(gear.inverse_dynamics(model, q, dq, ddq), ref)
        # zero velocity and acceleration: gravity alone
        z = np.zeros_like(dq)
        assert np.array_equal(gear.inverse_dynamics(model, q, z, z), _single(model, q, z, z, None))


def test_rnea_lanes_agree_with_the_reference_formulas():
    from gear.testing import reference_inverse_dynamics

    rng = np.random.default_rng(3)
    model = random_tree(rng, nbodies=10)
    q = model.random_configuration(rng, n=8)
    dq, ddq = rng.standard_normal((2, 8, model.nv))
    fe = rng.standard_normal((8, model.nbodies, 6))
    got = gear.inverse_dynamics(model, q, dq, ddq, fe)
    ref = reference_inverse_dynamics(model, q, dq, ddq, fe)
    assert np.max(np.abs(got - ref)) <= 1e-10 * max(1.0, np.max(np.abs(ref)))
