"""tests/standins/slurm_train_standin.py: a STAND-IN for the trainer
(jobs/train.py, not it), for tests/integration/slurm/*.sh only, that
speaks pipeline-job(7): progress events, a checkpoint every 4 steps
written with jobs/pljob/ (COMPLETE marker last, renamed into place), and
a resume from $PL_RESUME_FROM. Each start appends "start STEP restart N"
to $TRAIN_OUT, the end "done TOTAL"; PLJOB_DIR is jobs/.
"""
# 24 steps, a checkpoint every 4 (pljob.save_checkpoint: COMPLETE marker
# written last, directory renamed into place); resumes from PL_RESUME_FROM.
import json, os, sys, time
sys.path.insert(0, os.environ["PLJOB_DIR"])
import pljob

total = 24
root = os.path.join(os.environ["PL_WORKDIR"], "checkpoints")
out = os.environ["TRAIN_OUT"]
start = 0
resume = os.environ.get("PL_RESUME_FROM")
if resume:
    if pljob.verify_checkpoint(resume) is not None:
        sys.exit("resume point %s is not complete" % resume)
    with open(os.path.join(resume, "state.json")) as f:
        start = json.load(f)["step"]
with open(out, "a") as f:
    f.write("start %d restart %s\n" % (start, os.environ.get("SLURM_RESTART_COUNT", "0")))

def event(**kw):
    fd = os.open(os.environ["PL_EVENTS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    os.write(fd, (json.dumps(kw) + "\n").encode())
    os.close(fd)

for step in range(start + 1, total + 1):
    time.sleep(0.25)
    event(type="progress", step=step, total=total)
    if step % 4 == 0:
        def build(d, step=step):
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
        pljob.save_checkpoint(root, step, build)
        event(type="checkpoint", step=step, path=os.path.join(root, "checkpoint-%d" % step))
with open(out, "a") as f:
    f.write("done %d\n" % total)
