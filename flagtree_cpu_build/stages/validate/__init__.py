"""The validate stage: the checks' catalog, run and judgement, setup's validate stage, its plan, and the JUnit
report."""
