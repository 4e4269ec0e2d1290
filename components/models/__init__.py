"""Stage 2, the models' bytes: the RWX model store and, per model, the download/conversion Job that writes the
converted weights and the rendered Triton model repository onto it.

May import :mod:`components.common`, :mod:`components.settings` and :mod:`tritonft`; never another stage.
"""
