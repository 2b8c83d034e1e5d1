#!/usr/bin/python3
# %% [markdown]
# # libpathways from Python: data-parallel training on a 2x4 slice
#
# A notebook-style session (each `# %%` is a cell; run it top to bottom in
# Jupyter, VS Code, or as a script; reprs are printed so both read the same). It mirrors examples/demo.c:
# logistic regression, p(y=1|x) = sigmoid(x . w), trained with the batch
# split over the 8 devices of one 2x4 slice of the CPU backend and the
# weights replicated. One training step is one graph, built once and
# resubmitted; each step's weights are the previous step's output *future*.
#
#     PYTHONPATH=bindings/python:build/dev/bindings/python \
#         /usr/bin/python3 bindings/python/examples/notebook_training.py

# %%
import numpy as np

import pathways as pw

N, D, STEPS, LR = 256, 8, 30, 0.5
print("pathways", pw.__version__)

# %% [markdown]
# ## The fleet: one CPU backend, one 2x4 slice, a client, a virtual slice

# %%
rt = pw.Runtime({"name": "tpu-like-0", "mesh": "2x4"}, workers=2)
print(rt)

# %%
print(rt.slice(0))
print(rt.slice(0).devices[:3], "...")

# %%
client = rt.client("notebook")
vs = client.vslice("2x4")
print(vs)

# %% [markdown]
# ## Data: x ~ U(-1, 1), labels from known weights; put on the devices
# The batch is split over all 8 devices (`split(0,all)`), the weights are
# replicated. numpy arrays go in without a staging copy.

# %%
rng = np.random.default_rng(0)
true_w = np.array([(1 if d % 2 == 0 else -1) * (d + 1) / D for d in range(D)], np.float32)
x_host = rng.uniform(-1, 1, (N, D)).astype(np.float32)
y_host = (x_host @ true_w > 0).astype(np.float32).reshape(N, 1)

X = vs.put(x_host, pw.split(0))
Y = vs.put(y_host, pw.split(0))
W0 = vs.put(np.zeros((D, 1), np.float32))
print(X, Y, W0)

# %% [markdown]
# ## Programs for the CPU backend's built-in kernels
# `Program` objects print as the backend's program text.

# %%
rows = pw.ArraySpec("f32", (N, D), pw.split(0))
col = pw.ArraySpec("f32", (N, 1), pw.split(0))
wspec = pw.ArraySpec("f32", (D, 1))
partial_g = pw.ArraySpec("f32", (8, D, 1), pw.split(0))
partial_l = pw.ArraySpec("f32", (8, 1), pw.split(0))

matmul_xw = vs.compile(pw.Program("matmul", [rows, wspec], [col]))
loss_grad = vs.compile(pw.Program("logistic_loss_grad", [col, col], [col], {"scale": 1.0 / N}))
matmul_xtdz = vs.compile(pw.Program("matmul", [rows, col], [partial_g], {"transpose_a": 1}))
allreduce_g = vs.compile(pw.Program("all_reduce_sum", [partial_g], [wspec]))
sgd = vs.compile(pw.Program("sgd_update", [wspec, wspec], [wspec], {"lr": LR}))
loss = vs.compile(pw.Program("logistic_loss", [col, col], [col]))
loss_mean = vs.compile(pw.Program("reduce_mean", [col], [partial_l], {"axis": 0}))
allreduce_l = vs.compile(pw.Program("all_reduce_sum", [partial_l], ["f32[1] replicated"]))
print(pw.Program("sgd_update", [wspec, wspec], [wspec], {"lr": LR}))
print(sgd)

# %% [markdown]
# ## A Python kernel: accuracy per device shard
# Registered on the CPU backend, called on its pool threads with numpy views
# of each device's shards (no copies). It writes each shard's count of
# correct predictions; an all-reduce adds them up.

# %%
@rt.register_kernel("accuracy_count", inputs=["z", "y"], outputs=["hits"])
def accuracy_count(call):
    z, y = call.inputs
    call.outputs[0][...] = np.sum((z > 0) == (y > 0.5))


hits_part = pw.ArraySpec("f32", (8,), pw.split(0))
accuracy = vs.compile(pw.Program("accuracy_count", [col, col], [hits_part]))
sum_hits = vs.compile(pw.Program("all_reduce_sum", [hits_part], ["f32[] replicated"]))

# %% [markdown]
# ## One training step as a graph

# %%
step = client.graph("train_step")
x, y, w = step.parameter(vs, rows, "X"), step.parameter(vs, col, "y"), step.parameter(vs, wspec, "w")
z = step.compute(matmul_xw, x, w, name="logits")
dz = step.compute(loss_grad, z, y, name="dloss")
g = step.compute(allreduce_g, step.compute(matmul_xtdz, x, dz, name="grad_partial"),
                 name="grad_allreduce")
w2 = step.compute(sgd, w, g, name="sgd")
l = step.compute(allreduce_l, step.compute(loss_mean, step.compute(loss, z, y, name="loss"),
                                           name="loss_partial"), name="loss_allreduce")
hits = step.compute(sum_hits, step.compute(accuracy, z, y, name="hits_partial"), name="hits")
step.output(w2, l, hits)
step.finalize()
print(step)

# %% [markdown]
# ## Train: submit every step up front (asynchronous dispatch)
# `submit` returns at once; the weights of step k feed step k+1 before
# step k has run, and are donated so their memory can be reused.

# %%
w_cur, losses, hit_counts = W0, [], []
for s in range(STEPS):
    ex = step.submit(X, Y, w_cur, donate=[False, False, s > 0])
    w_cur, l_buf, h_buf = ex.outputs
    losses.append(l_buf)
    hit_counts.append(h_buf)
print(ex)

# %%
ex.wait(timeout=60)
loss_values = [float(b.numpy()[0]) for b in losses]
acc_values = [float(b.numpy()) / N for b in hit_counts]
for s in (0, 1, 2, STEPS - 1):
    print(f"step {s:2d} loss {loss_values[s]:.6f} accuracy {acc_values[s]:.3f}")

# %% [markdown]
# ## Inspect the result and check it against numpy

# %%
print(w_cur)
w_final = w_cur.numpy()
print("weights:", np.round(w_final.ravel(), 4))


def reference():
    w = np.zeros(D, np.float32)
    for _ in range(STEPS):
        zz = x_host.astype(np.float64) @ w
        p = 1 / (1 + np.exp(-zz))
        grad = ((p - y_host.ravel()) / N) @ x_host.astype(np.float64)
        last = np.mean(np.maximum(zz, 0) - zz * y_host.ravel() + np.log1p(np.exp(-np.abs(zz))))
        w = (w - LR * grad).astype(np.float32)
    return w, last


ref_w, ref_loss = reference()
err = float(np.max(np.abs(w_final.ravel() - ref_w)))
print(f"max |w - reference| = {err:.2e}; loss {loss_values[0]:.4f} -> {loss_values[-1]:.4f} "
      f"(reference {ref_loss:.4f}); memory {rt.memory_stats()['device']['live_bytes']} device bytes")

# %%
client.close()
rt.close()
ok = err < 1e-4 and loss_values[-1] < loss_values[0] and acc_values[-1] > 0.9
print("OK: loss decreased and weights match the numpy reference" if ok else "FAILED")
raise SystemExit(0 if ok else 1)
