# charts/: the Helm chart (charts/areal-operator); no C. Its test lints and
# renders it with the pinned helm and checks the rendered RBAC against the
# operator's API calls (charts/tests/rbac_check.py).
SCRIPT_TESTS += charts/tests/test_chart.sh
