"""What a pipeline is: its steps, their implementations (variants), the names that become
paths, the pipeline files (Python or YAML) and what frameworks a pipeline needs."""
