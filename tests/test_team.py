"""The fork-join team that shares batched calls between threads
(``gear/_team.h``): parts run on distinct threads, results equal the serial
path's bit for bit whatever the number of threads, calls from several
Python threads at once (the team busy: the caller runs every part) and
after ``fork()`` (the child starts without workers) give the same answers."""
import multiprocessing
import threading

import numpy as np
import pytest

import gear
from gear import _data
from gear import mechanisms as mech


def test_parts_run_on_distinct_threads_part_zero_on_the_caller():
    for n in (2, 3, 2, 1):
        ids, caller = _data.team_thread_ids(n)
        assert len(ids) == n and ids[0] == caller
        assert len(set(ids)) == n, "every part must run on a thread of its own"


@pytest.fixture
def threads():
    before = gear.get_num_threads()
    yield
    gear.set_num_threads(before)


def _arm_batch(N, seed=0):
    m = gear.load_urdf(gear.data_path("arm7.urdf"))
    rng = np.random.default_rng(seed)
    return m, m.random_configuration(rng, n=N), rng.standard_normal((N, m.nv)), rng.standard_normal((N, m.nv))


@pytest.mark.parametrize("N", [33, 64, 301])
def test_batches_equal_the_serial_path_on_any_number_of_threads(N, threads):
    m, q, dq, x = _arm_batch(N)
    sysm, q4 = mech.n_four_bar(3, tree="ground")
    rng = np.random.default_rng(N)
    Q4 = np.tile(q4, (N, 1)) + 1e-3 * rng.standard_normal((N, q4.size))
    dQ4, T4 = rng.standard_normal((N, sysm.model.nv)), rng.standard_normal((N, sysm.model.nv))
    fb, qf = mech.four_bar()
    Qf = np.tile(qf, (N, 1))
    dQf = np.stack([fb.project_velocity(qf, v) for v in rng.standard_normal((N, 3))])
    ddQf = fb.forward_dynamics(Qf, dQf, rng.standard_normal((N, 3))).ddq
    runs = {}
    for n in (1, 2, 3, 2, 4):        # the team grows, and later jobs leave workers idle
        gear.set_num_threads(n)
        inv = fb.inverse_dynamics(Qf, dQf, ddQf, actuated=["crank"])
        r = (gear.inverse_dynamics(m, q, dq, x), gear.forward_dynamics(m, q, dq, x),
             gear.mass_matrix(m, q), sysm.forward_dynamics(Q4, dQ4, T4).ddq, inv.tau, inv.lam)
        runs.setdefault(n, r)
        for a, b in zip(r, runs[1]):
            assert np.array_equal(a, b)


def test_calls_from_several_python_threads_at_once(threads):
    # batches release the GIL: the threads' calls overlap, and a call that
    # finds the team busy runs its parts itself
    gear.set_num_threads(2)
    m, q, dq, x = _arm_batch(600, seed=1)
    ref = gear.inverse_dynamics(m, q, dq, x)
    errors = []

    def work():
        try:
            for _ in range(200):
                if not np.array_equal(gear.inverse_dynamics(m, q, dq, x), ref):
                    errors.append("mismatch")
                    return
        except Exception as e:               # pragma: no cover - reported below
            errors.append(repr(e))

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a call hung"
    assert errors == []


def _child(conn):
    m, q, dq, x = _arm_batch(64, seed=2)
    gear.set_num_threads(2)
    conn.send(gear.inverse_dynamics(m, q, dq, x))
    conn.close()


def test_a_forked_child_runs_batches_on_its_own_team(threads):
    gear.set_num_threads(2)
    m, q, dq, x = _arm_batch(64, seed=2)
    ref = gear.inverse_dynamics(m, q, dq, x)     # the parent's team is running
    ctx = multiprocessing.get_context("fork")
    a, b = ctx.Pipe()
    p = ctx.Process(target=_child, args=(b,))
    p.start()
    assert a.poll(60), "the child's batch hung (workers inherited from the parent?)"
    got = a.recv()
    p.join(30)
    assert p.exitcode == 0 and np.array_equal(got, ref)
