"""Shared seeded fixtures: a random generator and random trees that cover
every joint kind (see :mod:`gear.testing`)."""
import numpy as np
import pytest

from gear import testing as gt

#: Seeds of the parametrised random trees.
TREE_SEEDS = (0, 1, 2, 3)


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name, so each test is reproducible
    on its own and different tests see different numbers."""
    seed = sum(ord(c) * (k + 1) for k, c in enumerate(request.node.name)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture(params=TREE_SEEDS, ids=lambda s: f"tree{s}")
def tree(request):
    """A 12-body random tree with every joint kind (at least once each)."""
    return gt.random_tree(np.random.default_rng(request.param), nbodies=12)


@pytest.fixture(params=gt.ALL_KINDS)
def joint_kind(request):
    """Name of each joint kind in turn."""
    return request.param


@pytest.fixture
def joint(joint_kind, rng):
    """A joint of each kind with random axes."""
    return gt.random_joint(joint_kind, rng)
