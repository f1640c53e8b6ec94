#!/usr/bin/python3
"""probe.py: one-step memory probe (stage `probe`, pipeline-job(7)).

    /usr/bin/python3 jobs/probe.py --config CONFIG.json [--events FILE]

One forward and one backward on the longest example of the token file (ties:
the longer response span, whose logits the recipe keeps), with the model in
training mode (model.train(): without it HF silently skips gradient
checkpointing and the probe measures the wrong thing, G20) and every memory
fix of the engine on, and no optimizer step.  With engine hf and shared prefixes
on (train's shared_prefix key, jobs/engines/prefix.py) the forward and
backward are the shared mode's for that example: its prefix's forward with
what its backward keeps, its suffix against the prefix's keys and values,
the prefix's backward (the peak of a shared-prefix step: a step's further
suffixes reuse the same memory); shared_prefix_tokens in the memory event
says so (0: plain).  It reports

    {"type":"memory","peak_mb":X,"pre_step_mb":Y,"key":K,"tokens":T,
     "response_len":R,"capacity_mb":C}

and exits 0, or reports {"type":"oom",...} and exits 3.  peak_mb is the
highest memory in use during the forward and backward; pre_step_mb the
memory in use before the forward (weights, adapter and, after the first
step, optimizer state).  The calibration (probe x (1 - over-estimate)) and
the refusal are the daemon's (probe stage plugin); the host-memory cap the
probe runs under is the plugin's too.

With engine hf it first runs pipelinectl doctor's checks (jobs/doctor.py)
for its device and cuda_device: a doctor event {ok, checks}, and a failed
check (a missing package, a known-bad combination such as G08, no CUDA
device) fails the probe with exit 2 before anything is loaded, naming
every failed check.

Config keys (CONFIG.json): the probe stage's, described with their
defaults, bounds and choices in pipeline.ini(5) (its probe section); the
recipe's are train's (plugins/lib/job/trainkeys.h), so the probe measures
the configuration train will run.  Each is read through the stage's key
table (jobs/pljob/keys.py, generated from the plugin's C table).
"""

import sys

import pljob


def pick(examples, key):
    if key:
        for ex in examples:
            if ex["key"] == key:
                return ex
        raise pljob.BadInput("example_key %s is not in the token file" % key)
    return max(examples, key=lambda e: (len(e["input_ids"]), e["response_len"]))


def body(job):
    import engines
    cfg, ev = job.cfg, job.events
    engine_name = cfg.choice("engine")
    tokens = cfg.path_in("tokens")
    want = cfg.str("example_key", None)
    ev.started(engine=engine_name)
    if engine_name == "hf":
        # pipelinectl doctor's checks, before anything is loaded.
        import doctor
        rep = doctor.run_checks(cfg.choice("device"),
                                cfg.int("cuda_device"))
        ev.emit("doctor", ok=rep.ok(), checks=rep.checks)
        if not rep.ok():
            raise pljob.BadInput("doctor: " + rep.summary())
    examples = pljob.load_tokens(tokens)
    ex = pick(examples, want)
    pljob.seed_everything(cfg.int("seed"))
    eng = engines.get(engine_name)(cfg, ev)
    eng.load()
    shared = False
    if eng.SHARED_PREFIX:
        shared, why = eng.shared_setup(examples)
        ev.emit("shared_prefix", on=shared, why=why)
    eng.set_train()
    if not eng.is_training():
        raise pljob.JobError("the model is not in training mode after model.train() (G20)")
    pre = eng.pre_step_mb()
    eng.reset_peak()
    P = 0
    with eng.train_context():
        if shared:
            loss, P = eng.probe_step(ex)
        else:
            loss = eng.loss(ex)
            eng.backward(loss)
            loss = float(loss.detach())
    peak = eng.peak_mb()
    ev.emit("memory", peak_mb=round(peak, 1), pre_step_mb=round(pre, 1), key=ex["key"],
            tokens=int(len(ex["input_ids"])), response_len=int(ex["response_len"]),
            capacity_mb=round(eng.capacity_mb(), 1), loss=loss, shared_prefix_tokens=int(P))
    ev.done()


if __name__ == "__main__":
    sys.exit(pljob.main("One-step memory probe (stage probe).", body, stage="probe"))
