"""
A campaign on a Dask cluster
============================

``gear.simulate(..., client=client)`` splits a batch of rollouts into
chunks, ships the model once per worker, runs the native rollout on each
worker and gathers the results, identical to the local run.  Here the
"cluster" is a ``LocalCluster`` of two worker processes; pointing
``Client`` at a scheduler's address runs the same code on a real cluster.
"""
import matplotlib.pyplot as plt
import numpy as np
from dask.distributed import Client, LocalCluster

import gear

if __name__ == "__main__":
    arm = gear.load_urdf(gear.data_path("arm7.urdf"))
    Q0 = arm.random_configuration(np.random.default_rng(0), n=64)
    dq0 = np.zeros(arm.nv)

    local = gear.simulate(arm, Q0, dq0, 0.5, 1e-3, record_every=10)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        remote = gear.simulate(arm, Q0, dq0, 0.5, 1e-3, record_every=10, client=client)
    print("Dask run equals the local run:", np.array_equal(np.asarray(remote.q), np.asarray(local.q)))
    print(f"{remote.stats['chunks']} chunks, {remote.stats['overhead_per_chunk'] * 1e3:.1f} ms overhead per chunk")

    fig, ax = plt.subplots(figsize=(7, 4))
    for k in range(0, 64, 8):
        ax.plot(local.t, np.asarray(remote.q)[k, :, 1], lw=1)
    ax.set_xlabel("t (s)")
    ax.set_ylabel("joint 2 angle (rad)")
    ax.set_title("64 rollouts of the arm, falling under gravity, run on 2 Dask workers")
    fig.tight_layout()
