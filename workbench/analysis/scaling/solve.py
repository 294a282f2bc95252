"""The numerics behind foxwb.workbench.analysis.scaling.fit (docs/scaling.md): the two law forms in log space, the Huber
objective on log-loss residuals, a grid of starts, and a batched damped Gauss-Newton solver that
fits many independent problems at once (the starts of a point fit, the resamples of a bootstrap),
with scipy's L-BFGS-B as its slow reference twin.

Internally a law is the vector theta = [e, a, alpha] or [e, a, alpha, b, beta] with
    L(N, D) = exp(e) + exp(a - alpha * (log N - x0)) + exp(b - beta * (log D - y0))
where x0, y0 are the mean log size and log token count of the ladder: centring keeps a and alpha
nearly uncorrelated, so the optimiser sees a well-conditioned problem. `to_public` turns theta into
the public [E, A, alpha(, B, beta)] of L = E + A/N^alpha + B/D^beta, and `law` evaluates those.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

PARAMS = {"N": ("E", "A", "alpha"), "ND": ("E", "A", "alpha", "B", "beta")}


@dataclass(frozen=True)
class Frame:
    """Where a law is centred: form "N" or "ND", x0 = mean log N, y0 = mean log D (0 for form "N")."""
    form: str
    x0: float
    y0: float = 0.0


def terms(frame: Frame, theta: np.ndarray, x: np.ndarray, y: np.ndarray | None) -> list[np.ndarray]:
    """The law's additive terms in nats: [E, A N^-alpha (, B D^-beta)], each broadcast to x's shape.
    theta [B, p]; x = log N and y = log D, [B, n] or [n]."""
    e, a, alpha = theta[:, 0:1], theta[:, 1:2], theta[:, 2:3]
    out = [np.exp(e) + 0 * x, np.exp(a - alpha * (x - frame.x0))]
    if frame.form == "ND":
        b, beta = theta[:, 3:4], theta[:, 4:5]
        out.append(np.exp(b - beta * (y - frame.y0)))
    return out


def log_pred(frame: Frame, theta: np.ndarray, x: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """The log of L in nats, [B, n]."""
    with np.errstate(over="ignore"):
        return np.log(sum(terms(frame, theta, x, y)))


def residuals_jac(frame, theta, x, y, log_obs) -> tuple[np.ndarray, np.ndarray]:
    """r = log L_pred - log L_obs [B, n] and its Jacobian d r / d theta [B, n, p]."""
    with np.errstate(over="ignore", invalid="ignore"):
        parts = terms(frame, theta, x, y)
        total = sum(parts)
        cols = [parts[0] / total, parts[1] / total, -parts[1] * (x - frame.x0) / total]
        if frame.form == "ND":
            cols += [parts[2] / total, -parts[2] * (y - frame.y0) / total]
        return np.log(total) - log_obs, np.stack(cols, axis=-1)


def to_public(frame: Frame, theta: np.ndarray) -> np.ndarray:
    """Internal rows [R, p] -> [E, A, alpha(, B, beta)] of L = E + A/N^alpha + B/D^beta."""
    out = np.exp(theta)
    out[:, 1] = np.exp(theta[:, 1] + theta[:, 2] * frame.x0)
    out[:, 2] = theta[:, 2]
    if frame.form == "ND":
        out[:, 3] = np.exp(theta[:, 3] + theta[:, 4] * frame.y0)
        out[:, 4] = theta[:, 4]
    return out


def law(form: str, params: np.ndarray, n, d=None) -> np.ndarray:
    """L in nats for public rows [R, p] ([E, A, alpha(, B, beta)]) at sizes n [G] in parameters and,
    for form "ND", tokens d (scalar or [G]): [R, G]."""
    params = np.atleast_2d(np.asarray(params, float))
    x = np.log(np.atleast_1d(np.asarray(n, float)))[None]
    out = params[:, :1] + np.exp(np.log(params[:, 1:2]) - params[:, 2:3] * x)
    if form == "ND":
        y = np.log(np.broadcast_to(np.asarray(d, float), x.shape[1:]))[None]
        out = out + np.exp(np.log(params[:, 3:4]) - params[:, 4:5] * y)
    return out


def huber(r: np.ndarray, delta: float) -> np.ndarray:
    """Huber loss divided by delta: r^2 / (2 delta) inside |r| <= delta, |r| - delta/2 outside, so
    that the objective's scale does not shrink with delta (the optimiser's tolerances stay meaningful)."""
    ar = np.abs(r)
    return np.where(ar <= delta, r * r / (2 * delta), ar - delta / 2)


def starts(frame: Frame, x: np.ndarray, y: np.ndarray | None, log_obs: np.ndarray) -> np.ndarray:
    """A grid of initial thetas [S, p]: E a share of the smallest loss, the exponents from slow to
    steep, the amplitude(s) set so the law passes near the mean loss at the ladder's centre."""
    lo, mean = np.exp(log_obs.min()), np.exp(log_obs.mean())
    exps = (0.1, 0.3, 0.7)
    rows = []
    for share in (0.1, 0.5, 0.9):
        rest = max(mean - share * lo, 1e-3 * mean)
        if frame.form == "N":
            rows += [(np.log(share * lo), np.log(rest), al) for al in exps + (1.5,)]
        else:
            rows += [(np.log(share * lo), np.log(rest / 2), al, np.log(rest / 2), be) for al in exps for be in exps]
    return np.array(rows, dtype=float)


def _step(frame, theta, jac, grad, weight, lam, x, y, log_obs, delta):
    """One damped Gauss-Newton step with curvature weights [B, n]: (step [B, p], residuals, Jacobian
    and objective at theta + step; a non-finite objective becomes inf)."""
    eye = np.eye(theta.shape[1])
    hess = np.einsum("bnp,bnq->bpq", jac * weight[..., None], jac)
    step = -np.linalg.solve(hess + lam[:, None, None] * (hess * eye + 1e-12 * eye), grad[..., None])[..., 0]
    r, jac_new = residuals_jac(frame, theta + step, x, y, log_obs)
    obj = huber(r, delta).sum(axis=1)
    return step, r, jac_new, np.where(np.isfinite(obj), obj, np.inf)


def fit_batch(frame: Frame, theta0, x, y, log_obs, delta: float, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """Minimises the Huber objective for B independent problems at once: theta0 [B, p]; x, y,
    log_obs [B, n] (or [n], shared). Returns thetas [B, p] and a converged mask [B].

    Each iteration tries two damped Gauss-Newton steps along the Huber gradient J^T psi(r) / delta
    and keeps the lower objective: one with the iteratively reweighted weights min(1, delta/|r|) / delta
    (a majoriser: safe far from the optimum) and one with the loss's own curvature (1/delta inside
    the quadratic zone, nearly 0 outside: fast near it, where the first crawls). Levenberg damping
    rises on a rejected step and falls on an accepted one, so the objective never rises. A row stops
    when its gradient or its accepted step vanishes (converged) or no damping helps (not converged)."""
    log_obs = np.asarray(log_obs, float)
    theta = np.array(np.broadcast_to(theta0, (len(log_obs), np.shape(theta0)[-1])), dtype=float)
    x = np.broadcast_to(x, log_obs.shape)
    y = None if y is None else np.broadcast_to(y, log_obs.shape)
    lam = np.full(len(theta), 1e-3)
    converged = np.zeros(len(theta), bool)
    r, jac = residuals_jac(frame, theta, x, y, log_obs)
    obj = huber(r, delta).sum(axis=1)
    for _ in range(max_iter):
        # Work on the rows still running only: most converge within a few dozen iterations.
        i = np.flatnonzero(~converged & (lam < 1e10) & np.isfinite(obj))
        if len(i) == 0:
            break
        args = (x[i], None if y is None else y[i], log_obs[i], delta)
        abs_r = np.abs(r[i])
        grad = np.einsum("bnp,bn->bp", jac[i], np.clip(r[i], -delta, delta) / delta)
        mm = _step(frame, theta[i], jac[i], grad, np.minimum(1.0, delta / np.maximum(abs_r, 1e-300)) / delta,
                   lam[i], *args)
        nt = _step(frame, theta[i], jac[i], grad, np.where(abs_r <= delta, 1.0, 1e-3) / delta, lam[i], *args)
        use_nt = nt[3] < mm[3]
        step, r_t, jac_t, obj_t = (np.where(use_nt.reshape((-1,) + (1,) * (u.ndim - 1)), v, u) for u, v in zip(mm, nt))
        ok = obj_t <= obj[i]
        a = i[ok]
        theta[a], r[a], jac[a], obj[a] = theta[a] + step[ok], r_t[ok], jac_t[ok], obj_t[ok]
        lam[i] = np.where(ok, np.maximum(lam[i] / 3, 1e-12), lam[i] * 4)
        converged[i] = (np.abs(grad).max(axis=1) < 1e-8) | (ok & (np.abs(step).max(axis=1) < 1e-9))
    return theta, converged & np.isfinite(obj)


def fit_reference(frame: Frame, theta0, x, y, log_obs, delta: float) -> tuple[np.ndarray, float]:
    """The slow, readable twin of fit_batch for one problem: scipy's L-BFGS-B on the same objective
    from theta0 [p]; x, y, log_obs [n]. Returns (theta [p], objective). Tests compare the two."""
    def fun(theta):
        r, jac = residuals_jac(frame, theta[None], x[None], None if y is None else y[None], log_obs[None])
        psi = np.clip(r, -delta, delta) / delta
        return float(huber(r, delta).sum()), (psi[..., None] * jac).sum(axis=(0, 1))

    res = optimize.minimize(fun, np.asarray(theta0, float), jac=True, method="L-BFGS-B",
                            options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10})
    return res.x, float(res.fun)
