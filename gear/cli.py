"""Command line: ``gear demo`` and ``gear info MODEL``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gear", description="gear rigid-body dynamics")
    sub = parser.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="run the demo on the bundled robots")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--batch", type=int, default=20000)
    i = sub.add_parser("info", help="load a URDF/MJCF file and describe the model")
    i.add_argument("path")
    i.add_argument("--floating-base", action="store_true")
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        from .demo import main as demo_main

        demo_main(["--seed", str(args.seed), "--batch", str(args.batch)])
        return 0
    import gear

    try:
        if args.path.endswith(".urdf"):
            m = gear.load_urdf(args.path, floating_base=args.floating_base)
        else:
            m = gear.load_mjcf(args.path)
    except (gear.ModelFileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(m)
    for k, (b, j, p) in enumerate(zip(m.body_names, m.joints, m.parents)):
        parent = "world" if p < 0 else m.body_names[p]
        print(f"  {k:3d} {b:<24} <- {parent:<24} {m.joint_names[k]} {j!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
