"""The answer benchmark's parts; `bench/answers.py` is its command line and says what it
measures. One module a job: the QA set, the configurations, asking the gateway, the
collections of the suite, scoring and the tables."""
