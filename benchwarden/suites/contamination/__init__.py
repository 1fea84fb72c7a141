"""The `contamination` suite: does concurrency change what a server answers, or leak one
request into another? (SPEC.md §2)

Map:
- `probes`: prompts, canaries and topics drawn from the run seed (pure).
- `presets`: engine presets and the exact request body (pure).
- `scoring`: classification of every probe × leg, the counters and the verdict (pure).
- `fidelity`: peak in flight and launch skew of each rung, from client timings (pure).
- `driver`: the legs against a server, every request recorded as it completes (I/O).
- `report`: the typed report (`ContaminationReport`), built once from the store.
- `terminal`, `html`: views that format the typed report and compute nothing.

Python API: `driver.ContaminationConfig` and `driver.run_contamination(config, store)`.
"""
