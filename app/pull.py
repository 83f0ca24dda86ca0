"""``floodgate pull``: placeholder replaced below."""
