"""The delivery account's side of CI: one deploy role per GitHub environment, each trusting only the workflow and
branch that may deploy there (:mod:`components.delivery.trust`, pure; :mod:`components.delivery.sessions`, each
role's maximum session from its jobs', pure; :mod:`components.delivery.roles`, the roles)."""
