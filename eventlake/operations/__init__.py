"""Operating pipelines: where each flow stands (status), the monitor of a run (metrics
endpoint, dashboard), checkpoint inspection and watermark advice (lateness).

Above :mod:`eventlake.pipelines` and :mod:`eventlake.monitoring`: it knows plans and
pipelines, the monitoring package only progress events and the broker.
"""
