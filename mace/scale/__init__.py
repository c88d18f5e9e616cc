"""Sample loops and sweeps that outgrow one process: sharded, resumable, in process or on Ray.

shards.py    Shard plan and the on-disk shard store (resume)
runner.py    where shards run: in process, or ray_pool.py (the only module importing ray)
accuracy.py  accuracy_validation_script sharded; postprocess on the driver in sample order
variants.py  a model converted for another runtime (cpu, gpu, dsp, quantized)
stat.py      run --quantize_stat sharded; the log identical to a single-process run
sweep.py     models x runtimes x devices: validate, benchmark, accuracy; sweep_page.py its HTML
docs/scale.md has the design and the fault model.
"""
