"""gear.maximal: joint coordinates <-> body poses and twists, round trips on
random trees of every joint kind, and named errors for poses that break a
joint."""
import numpy as np
import pytest

import gear
from gear.testing import ALL_KINDS, random_tree


@pytest.mark.parametrize("seed,root_free", [(0, False), (1, False), (2, False), (3, True), (4, True)])
def test_round_trip_on_random_trees(seed, root_free):
    model = random_tree(seed, nbodies=12, kinds=ALL_KINDS, root_free=root_free)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        q = model.random_configuration(rng)
        dq = rng.standard_normal(model.nv)
        poses, twists = gear.maximal.from_reduced(model, q, dq)
        assert poses.shape == (model.nbodies, 4, 4) and twists.shape == (model.nbodies, 6)
        q2, dq2 = gear.maximal.to_reduced(model, poses, twists)
        # same configuration on the manifold (angles may wrap, quaternions flip)
        assert np.abs(model.difference(q, q2)).max() < 1e-9
        np.testing.assert_allclose(dq2, dq, rtol=0, atol=1e-9)
        np.testing.assert_allclose(gear.maximal.from_reduced(model, q2), poses, atol=1e-12)
        assert np.array_equal(gear.maximal.to_reduced(model, poses), q2)


def test_poses_that_break_a_joint_are_named():
    model = gear.load_urdf(gear.data_path("arm7.urdf"))
    q = model.random_configuration(np.random.default_rng(0))
    poses = gear.maximal.from_reduced(model, q)
    bad = poses.copy()
    bad[3, :3, 3] += [0.0, 0.01, 0.0]          # link4 pulled off its revolute joint
    with pytest.raises(ValueError, match="joint 'joint4'.*violate"):
        gear.maximal.to_reduced(model, bad)
    bad = poses.copy()
    bad[2, :3, :3] *= 1.1
    with pytest.raises(ValueError, match="poses\\[2\\].*rigid"):
        gear.maximal.to_reduced(model, bad)
    with pytest.raises(ValueError, match="poses.*shape"):
        gear.maximal.to_reduced(model, poses[:3])
    _, V = gear.maximal.from_reduced(model, q, np.ones(model.nv))
    V = V.copy()
    V[0, 3] += 1.0                              # link1 translating: a revolute cannot
    with pytest.raises(ValueError, match="joint 'joint1'.*does not allow"):
        gear.maximal.to_reduced(model, poses, V)
