def load_mjcf(path):
    raise NotImplementedError
