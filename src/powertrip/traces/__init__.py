"""Power traces: the Google PowerData2019 loader and a generator calibrated to it."""
