/* a3c.learn._update_kernel: a worker's update between the network's forward and backward passes, in one call, for
 * the Categorical family (a Discrete action space): the bootstrap at truncation and GAE (a3c.learn.losses.
 * rollout_targets), --normalize-advantage (normalized_advantages), and the loss's terms and gradient with respect to
 * the logits and the values (actor_critic_loss_grads with Categorical.policy_grad_np). The same formulas as those
 * numpy functions (a3c.learn.update.closed_form), the fallback where the kernel is not built; a3c.learn.update.paths picks a path
 * once per worker, and the conformance test holds each to the reference (tests/learn/test_paths.py).
 *
 * Why C: on a rollout of 8 envs x 5 steps the numpy version is about forty array operations on arrays of 40 numbers,
 * each costing a microsecond or two of call overhead and almost no arithmetic; this is one call on every update of
 * every worker. The arithmetic is done in double and the float32 outputs rounded once: against the float64 answer the
 * results are as exact as the numpy version's float32 ones, or more where that cancels large terms (tests/learn/
 * test_fused_loss.py).
 *
 * Buffers come through the buffer protocol without strides: C-contiguous ones only (numpy refuses others); every
 * buffer's element type (float32 arrays, int64 actions, float64 loss terms, in the machine's byte order) and length
 * are checked here against the shapes passed, so a wrong call raises and never misreads, reads or writes out of
 * bounds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* Whether a buffer's struct-module format is one element of ``kind`` ('f': float32, 'd': float64, 'i': a signed
 * integer) in native byte order and alignment ("@" or no prefix; "=" and "<" / ">" where they are the native order)
 * of ``item_size`` bytes. numpy writes int64 as 'l' on LP64 and 'q' elsewhere: either is accepted for an integer of
 * the right size. */
static int element_is(const Py_buffer *view, char kind, Py_ssize_t item_size) {
    const char *f = view->format == NULL ? "B" : view->format;
    const int little = PY_LITTLE_ENDIAN;
    if (*f == '@' || *f == '=' || (*f == '<' && little) || (*f == '>' && !little)) {
        f++;
    }
    if (f[0] == '\0' || f[1] != '\0' || view->itemsize != item_size) {
        return 0;
    }
    if (kind == 'i') {
        return f[0] == 'q' || f[0] == 'l';
    }
    return f[0] == kind;
}

static int take(PyObject *obj, Buf *buf, int writable, Py_ssize_t items, char kind, Py_ssize_t item_size,
                const char *name) {
    if (PyObject_GetBuffer(obj, &buf->view, PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : PyBUF_SIMPLE)) < 0) {
        return -1;
    }
    buf->held = 1;
    if (!element_is(&buf->view, kind, item_size)) {
        PyErr_Format(PyExc_TypeError, "%s: elements of format '%s' (%zd bytes), expected %s", name,
                     buf->view.format == NULL ? "B" : buf->view.format, buf->view.itemsize,
                     kind == 'f' ? "float32" : (kind == 'd' ? "float64" : "int64"));
        return -1;
    }
    if (buf->view.len != items * item_size) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", name, buf->view.len, items * item_size);
        return -1;
    }
    return 0;
}

static void release(Buf *bufs, int count) {
    for (int i = 0; i < count; i++) {
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
    }
}

/* categorical_update(rewards, values, final_values, terminated, truncated, logits, actions,
 *                    dlogits_t, dvalues, losses, T, K, n, gamma, gae_lambda, ent_coef, vf_coef, normalize)
 * rewards, terminated, truncated: float32 [T, K]; values: float32 [T + 1, K] (the boundary observation's last);
 * final_values: float32 [T, K] (V of the observation returned with truncated=True) or None where no episode was
 * truncated; logits: float32 [B, n] with B = T K; actions: int64 [B], each in [0, n).
 * Writes dlogits_t: float32 [n, B] (the logits' gradient, transposed, as Categorical.policy_grad_np's is stored);
 * dvalues: float32 [B]; losses: float64 [total, policy, value, entropy]. */
static PyObject *categorical_update(PyObject *self, PyObject *args) {
    PyObject *objs[10];
    Py_ssize_t T, K, n;
    double gamma, lam, ent_coef, vf_coef;
    int normalize;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOnnnddddp", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5],
                          &objs[6], &objs[7], &objs[8], &objs[9], &T, &K, &n, &gamma, &lam, &ent_coef, &vf_coef,
                          &normalize)) {
        return NULL;
    }
    if (T < 1 || K < 1 || n < 1) {
        PyErr_SetString(PyExc_ValueError, "T, K and n must be positive");
        return NULL;
    }
    const Py_ssize_t B = T * K;
    Buf bufs[10] = {{{0}}};
    const int truncations = objs[2] != Py_None;
    if (take(objs[0], &bufs[0], 0, B, 'f', 4, "rewards") < 0 ||
        take(objs[1], &bufs[1], 0, B + K, 'f', 4, "values") < 0 ||
        (truncations && take(objs[2], &bufs[2], 0, B, 'f', 4, "final_values") < 0) ||
        take(objs[3], &bufs[3], 0, B, 'f', 4, "terminated") < 0 ||
        take(objs[4], &bufs[4], 0, B, 'f', 4, "truncated") < 0 ||
        take(objs[5], &bufs[5], 0, B * n, 'f', 4, "logits") < 0 ||
        take(objs[6], &bufs[6], 0, B, 'i', 8, "actions") < 0 ||
        take(objs[7], &bufs[7], 1, B * n, 'f', 4, "dlogits_t") < 0 ||
        take(objs[8], &bufs[8], 1, B, 'f', 4, "dvalues") < 0 || take(objs[9], &bufs[9], 1, 4, 'd', 8, "losses") < 0) {
        release(bufs, 10);
        return NULL;
    }
    const float *rewards = bufs[0].view.buf, *values = bufs[1].view.buf;
    const float *final_values = truncations ? bufs[2].view.buf : NULL;
    const float *terminated = bufs[3].view.buf, *truncated = bufs[4].view.buf, *logits = bufs[5].view.buf;
    const int64_t *actions = bufs[6].view.buf;
    float *dlogits_t = bufs[7].view.buf, *dvalues = bufs[8].view.buf;
    double *losses = bufs[9].view.buf;
    for (Py_ssize_t i = 0; i < B; i++) {
        if (actions[i] < 0 || actions[i] >= n) {
            release(bufs, 10);
            PyErr_Format(PyExc_ValueError, "action %lld at row %zd is outside [0, %zd)", (long long)actions[i], i, n);
            return NULL;
        }
    }
    double *adv = malloc(sizeof(double) * (size_t)(2 * B + n));
    if (adv == NULL) {
        release(bufs, 10);
        return PyErr_NoMemory();
    }
    double *policy_adv = adv + B, *log_p = adv + 2 * B;

    /* GAE, from the last step back. delta_t = r_t + gamma (1 - terminated_t) V(s_{t+1}) - V(s_t), where V(s_{t+1})
     * is the next row's value inside the rollout and at its boundary, and V(final observation) where the episode was
     * truncated at t (the bootstrap at truncation: the episode did not end in the MDP, the time limit cut it).
     * A_t = delta_t + gamma lambda (1 - done_t) A_{t+1}: the trace stops at any episode end. The rounding to
     * float32 of each step's advantage mirrors the numpy version, which keeps A in a float32 array. */
    for (Py_ssize_t k = 0; k < K; k++) {
        double following = 0.0;
        for (Py_ssize_t t = T - 1; t >= 0; t--) {
            const Py_ssize_t i = t * K + k;
            const double next = (truncations && truncated[i] != 0.0f) ? final_values[i] : values[i + K];
            const double delta = (float)((float)((1.0f - terminated[i]) * (float)next * (float)gamma + rewards[i]) -
                                         values[i]);
            const float done = terminated[i] > truncated[i] ? terminated[i] : truncated[i];
            const double trace = (float)((1.0f - done) * (float)(gamma * lam));
            following = (float)(delta + (float)(trace * following));
            adv[i] = following;
        }
    }
    /* --normalize-advantage: (A - mean) / (sample std + 1e-8) in float64, for the policy gradient only */
    for (Py_ssize_t i = 0; i < B; i++) {
        policy_adv[i] = adv[i];
    }
    if (normalize) {
        double mean = 0.0;
        for (Py_ssize_t i = 0; i < B; i++) {
            mean += adv[i];
        }
        mean /= (double)B;
        double squares = 0.0;
        for (Py_ssize_t i = 0; i < B; i++) {
            policy_adv[i] = adv[i] - mean;
            squares += policy_adv[i] * policy_adv[i];
        }
        if (B > 1) {
            const double scale = sqrt(squares / (double)(B - 1)) + 1e-8;
            for (Py_ssize_t i = 0; i < B; i++) {
                policy_adv[i] /= scale;
            }
        }
        for (Py_ssize_t i = 0; i < B; i++) {
            policy_adv[i] = (float)policy_adv[i];
        }
    }

    /* The loss's gradient w.r.t. the outputs, with p = softmax(z) over B samples (Categorical.policy_grad_np):
     *   d policy / d z_ij = (A_i / B) (p_ij - [j == a_i]),  d (-c_e H) / d z_ij = (c_e / B) p_ij (log p_ij + H_i),
     *   d (c_v value) / d V_i = (c_v / B) (V_i - R_i),  R_i = A_i + V_i (the raw advantages' returns). */
    double policy_sum = 0.0, value_sum = 0.0, entropy_sum = 0.0;
    for (Py_ssize_t i = 0; i < B; i++) {
        const float *z = logits + i * n;
        double top = z[0];
        for (Py_ssize_t j = 1; j < n; j++) {
            if (!(z[j] <= top)) { /* (NaN-propagating, as numpy's maximum) */
                top = z[j];
            }
        }
        double total = 0.0;
        for (Py_ssize_t j = 0; j < n; j++) {
            log_p[j] = (double)z[j] - top;
            total += exp(log_p[j]);
        }
        const double log_total = log(total);
        double entropy = 0.0;
        for (Py_ssize_t j = 0; j < n; j++) {
            log_p[j] -= log_total;
            entropy -= exp(log_p[j]) * log_p[j];
        }
        const double scaled_adv = policy_adv[i] / (double)B;
        for (Py_ssize_t j = 0; j < n; j++) {
            const double p = exp(log_p[j]);
            double g = p * ((log_p[j] + entropy) * (ent_coef / (double)B) + scaled_adv);
            if (j == actions[i]) {
                g -= scaled_adv;
            }
            dlogits_t[j * B + i] = (float)g;
        }
        const float returns = (float)((float)adv[i] + values[i]);
        const double error = (double)(values[i] - returns);
        dvalues[i] = (float)(error * (vf_coef / (double)B));
        policy_sum += log_p[actions[i]] * policy_adv[i];
        value_sum += error * error;
        entropy_sum += entropy;
    }
    const double policy_loss = -policy_sum / (double)B, value_loss = 0.5 * value_sum / (double)B;
    const double entropy_mean = entropy_sum / (double)B;
    losses[0] = policy_loss + vf_coef * value_loss - ent_coef * entropy_mean;
    losses[1] = policy_loss;
    losses[2] = value_loss;
    losses[3] = entropy_mean;
    free(adv);
    release(bufs, 10);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"categorical_update", categorical_update, METH_VARARGS,
     "categorical_update(rewards, values, final_values, terminated, truncated, logits, actions, dlogits_t, dvalues, "
     "losses, T, K, n, gamma, gae_lambda, ent_coef, vf_coef, normalize): GAE and the Categorical actor-critic loss's "
     "terms and gradient in one call (see a3c.learn.update.kernel)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_update_kernel", "A worker's update between its forward and backward passes, in C.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__update_kernel(void) { return PyModule_Create(&module); }
