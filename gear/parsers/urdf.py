def load_urdf(path, floating_base=False, merge_fixed=True, gravity=(0.0, 0.0, -9.81)):
    raise NotImplementedError
