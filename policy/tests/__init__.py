"""Direct tests of the CrossGuard policies (run in the .tools/policy venv) and resource builders."""
