"""Apache Beam's interpretation of the jobs' declarations (``pipelines.plan``): ``plan``."""
