"""A training run: ONE loop for every task, and what a run's life needs around it.

    loop.py          pretrain(), finetune(), train(task, options): the loop, top-down
    optimization.py  Google's step after the loss: the rate's schedule, global-norm clipping, AdamWeightDecay
    checkpoint.py    the run folder and the training state (resume bit for bit)
    resume.py        --resume: the state checked against the command (never two runs mixed), then restored
    paths.py         --resume's path settings: the files the run named, compared as files from any directory
    lock.py          one run per folder
    report.py        the progress line, the non-finite guard's message, the closing summary
    distributed.py   torchrun: each process its share of every batch, gradients all-reduced
    arithmetic.py    the threads and GEMM backend the steps were computed with (a resume follows them)
    precision.py     --bf16: whether bf16 autocast is faster than float32 on this CPU
    plot.py          the loss curve (and dev figures) of a run
"""
