"""Adapters from Arbor's tasks and sandboxes to RL and agent frameworks.

Each module imports its framework, so import only the one you use:

- :mod:`arbor.adapters.trl`: an ``environment_factory`` class for TRL's ``GRPOTrainer``.
- :mod:`arbor.adapters.skyrl`: a SkyRL-gym ``BaseTextEnv``, registered as ``"arbor"``.
- :mod:`arbor.adapters.verifiers`: a verifiers v1 ``Runtime`` over an Arbor sandbox.
- :mod:`arbor.adapters.harbor`: a Harbor ``BaseEnvironment`` (and verifier) over Arbor.
"""
