#!/usr/bin/env python3
"""Cotangent against an independent AD tool (HIPS autograd, from PyPI) on standard test functions
that were not written for Cotangent (optimisation benchmarks, a logistic loss, a small MLP, an ODE
integrator, and array programs: dot and matrix products, logsumexp, softmax cross-entropy, a dense
network). Each function is written once in Python for autograd (on numpy arrays) and once in the
Cotangent language; every stage's gradient (from `cotangent run --json`) must match autograd's to 1e-9.

Usage: check.py path/to/cotangent
"""
import ast
import json
import math
import subprocess
import sys

import autograd.numpy as np
from autograd import grad

PI = math.pi

CASES = [
    ("rosenbrock", "(-1.2, 1.0)", None,
     "def main (x, y) = (1.0 - x) * (1.0 - x) + 100.0 * (y - x * x) * (y - x * x)",
     lambda v: (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2),
    ("beale", "(1.0, 1.5)", None,
     "def sq a = a * a\n"
     "def main (x, y) = sq (1.5 - x + x * y) + sq (2.25 - x + x * y * y) + sq (2.625 - x + x * y * y * y)",
     lambda v: (1.5 - v[0] + v[0] * v[1]) ** 2 + (2.25 - v[0] + v[0] * v[1] ** 2) ** 2 + (2.625 - v[0] + v[0] * v[1] ** 3) ** 2),
    ("himmelblau", "(1.0, 2.0)", None,
     "def main (x, y) = let a = x * x + y - 11.0 in let b = x + y * y - 7.0 in a * a + b * b",
     lambda v: (v[0] ** 2 + v[1] - 11) ** 2 + (v[0] + v[1] ** 2 - 7) ** 2),
    ("styblinski-tang", "(0.5, -1.5, 2.5)", None,
     "def st x = x * x * x * x - 16.0 * x * x + 5.0 * x\n"
     "def main (a, b, c) = (st a + st b + st c) / 2.0",
     lambda v: sum(x ** 4 - 16 * x ** 2 + 5 * x for x in v) / 2),
    ("ackley", "(0.7, -0.3)", None,
     "def pi = 3.141592653589793\n"
     "def main (x, y) = 0.0 - 20.0 * exp (-0.2 * sqrt (0.5 * (x * x + y * y)))"
     " - exp (0.5 * (cos (2.0 * pi * x) + cos (2.0 * pi * y))) + exp 1.0 + 20.0",
     lambda v: -20 * np.exp(-0.2 * np.sqrt(0.5 * (v[0] ** 2 + v[1] ** 2)))
     - np.exp(0.5 * (np.cos(2 * PI * v[0]) + np.cos(2 * PI * v[1]))) + np.exp(1.0) + 20),
    ("logistic-loss", "((0.3, -0.2), 0.1)", None,
     "def softplus z = log (1.0 + exp z)\n"
     "def loss (w1, w2) b (x1, x2) y = softplus (0.0 - y * (w1 * x1 + w2 * x2 + b))\n"
     "def main (w, b) = loss w b (1.0, 2.0) 1.0 + loss w b (-1.5, 0.5) (-1.0) + loss w b (0.3, -0.7) 1.0",
     lambda v: sum(np.log(1 + np.exp(-y * (v[0] * x1 + v[1] * x2 + v[2])))
                   for (x1, x2, y) in [(1.0, 2.0, 1.0), (-1.5, 0.5, -1.0), (0.3, -0.7, 1.0)])),
    ("mlp", "((0.1, 0.2, -0.3, 0.4), (0.5, -0.6))", None,
     "def layer (a, b, c, d) (x, y) = (tanh (a * x + b * y), tanh (c * x + d * y))\n"
     "def main (w, v) = let (h1, h2) = layer w (0.7, -1.2) in let (v1, v2) = v in v1 * h1 + v2 * h2",
     lambda v: v[4] * np.tanh(v[0] * 0.7 + v[1] * -1.2) + v[5] * np.tanh(v[2] * 0.7 + v[3] * -1.2)),
    ("euler-ode", "(1.0, 0.5)", None,
     "param steps = 20\n"
     "def step (x, v) k h = (x + h * v, v - h * k * x)\n"
     "def run n s k h = if n == 0 then s else run (n - 1) (step s k h) k h\n"
     "def main (k, h0) = let (x, v) = run steps (1.0, 0.0) k (h0 / 10.0) in x * x + v * v",
     None),  # autograd function built below (a loop)
    ("polar-output", "(2.0, 0.6)", "(1.0, -2.0)",
     "def main (r, t) = (r * cos t, r * sin t)",
     lambda v: 1.0 * v[0] * np.cos(v[1]) - 2.0 * v[0] * np.sin(v[1])),
    ("log-sum-exp", "(0.2, -1.3, 2.1)", None,
     "def main (a, b, c) = let m = if a > b then (if a > c then a else c) else (if b > c then b else c) in"
     " m + log (exp (a - m) + exp (b - m) + exp (c - m))",
     lambda v: np.log(np.exp(v[0]) + np.exp(v[1]) + np.exp(v[2]))),
    ("atan2-angle", "(0.3, -1.1)", None,
     "def main (x, y) = atan2 y x * sqrt (x * x + y * y) + abs (x - y)",
     lambda v: np.arctan2(v[1], v[0]) * np.sqrt(v[0] ** 2 + v[1] ** 2) + np.abs(v[0] - v[1])),
    ("power-and-friends", "(1.3, 0.6)", None,
     "def main (x, y) = x ** y + atan (x * y) * sinh y - cosh (x - y) + min x y * max (x * y) 1.0"
     " + floor (2.0 * x) * y + log1p (x * x) - expm1 (-y) + sigmoid (x - 3.0 * y)",
     lambda v: v[0] ** v[1] + np.arctan(v[0] * v[1]) * np.sinh(v[1]) - np.cosh(v[0] - v[1])
     + np.minimum(v[0], v[1]) * np.maximum(v[0] * v[1], 1.0) + np.floor(2 * v[0]) * v[1]
     + np.log1p(v[0] ** 2) - np.expm1(-v[1]) + 1 / (1 + np.exp(-(v[0] - 3 * v[1])))),
]

# Array programs: `at` is a Cotangent input that is also a Python literal; the autograd function takes
# it with every list of numbers as a numpy array (a list of rows as a matrix) and integers as they are.
ARRAY_CASES = [
    ("dot", "([0.3, -1.2, 2.0, 0.5, 1.5], [1.1, 0.4, -0.7, 2.2, -0.3])", None,
     "def main (a, b) = sum (map2 (\\x y -> x * y) a b)",
     lambda v: np.dot(v[0], v[1])),
    ("matvec-norm", "([[0.5, -1.0, 2.0, 0.1], [1.5, 0.2, -0.3, 0.8], [-0.6, 0.9, 0.4, -1.1]], [1.0, -0.5, 0.25, 2.0])", None,
     "def matvec m v = build (length m) (\\i -> sum (build (length v) (\\j -> m ! i ! j * v ! j)))\n"
     "def main (m, v) = sum (map (\\y -> y * y) (matvec m v))",
     lambda v: np.sum(np.dot(v[0], v[1]) ** 2)),
    ("matmul-trace", "([[1.0, 0.5], [-2.0, 0.3], [0.7, 1.2]], [[0.4, -1.0, 2.0], [1.5, 0.6, -0.2]])", None,
     "def col b j = map (\\row -> row ! j) b\n"
     "def matmul a b = map (\\r -> build (length (b ! 0)) (\\j -> sum (map2 (\\x y -> x * y) r (col b j)))) a\n"
     "def main (a, b) = let c = matmul a b in sum (build (length c) (\\i -> sin (c ! i ! i)))",
     lambda v: np.sum(np.sin(np.diag(np.dot(v[0], v[1]))))),
    ("logsumexp", "[0.2, -1.3, 2.1, 0.7, -0.4, 1.6]", None,
     "def main xs = let m = reduce (\\a b -> max a b) (xs ! 0) xs in"
     " m + log (sum (map (\\x -> exp (x - m)) xs))",
     lambda v: np.log(np.sum(np.exp(v)))),
    ("softmax-cross-entropy", "([0.5, -0.2, 1.7, 0.3], 2)", None,
     "def logsumexp xs = let m = fold (\\a b -> max a b) (xs ! 0) xs in m + log (sum (map (\\x -> exp (x - m)) xs))\n"
     "def main (z, y) = logsumexp z - z ! y",
     lambda v: -np.log(np.exp(v[0][v[1]]) / np.sum(np.exp(v[0])))),
    ("mlp-3-4-2-xent", "(([[0.2, -0.5, 0.1], [0.7, 0.3, -0.4], [-0.6, 0.8, 0.05], [0.1, 0.1, 0.9]], [0.0, 0.1, -0.1, 0.2]),"
     " ([[0.3, -0.7, 0.5, 0.2], [-0.4, 0.6, 0.1, -0.8]], [0.05, -0.05]))", None,
     "def dense (w, b) x = map2 (\\row bi -> sum (map2 (\\p q -> p * q) row x) + bi) w b\n"
     "def lse xs = log (sum (map exp xs))\n"
     "def main (l1, l2) = let z = dense l2 (map tanh (dense l1 [0.9, -1.4, 0.6])) in lse z - z ! 1",
     lambda v: (lambda z: np.log(np.sum(np.exp(z))) - z[1])(
         np.dot(v[1][0], np.tanh(np.dot(v[0][0], np.array([0.9, -1.4, 0.6])) + v[0][1])) + v[1][1])),
    ("reduce-product", "[1.5, -0.8, 2.0, 0.6, -1.1]", None,
     "def main xs = reduce (\\a b -> a * b) 1.0 xs",
     lambda v: np.prod(v)),
    ("prefix-sums", "[0.4, -1.0, 2.5, 0.3]", None,
     "def main xs = sum (map (\\s -> s * s) (scanl (\\a b -> a + b) 0.0 xs))",
     lambda v: np.sum(np.cumsum(v) ** 2)),
    ("horner-fold", "([1.0, -2.0, 0.5, 3.0, -1.0], 0.7)", None,
     "def main (cs, x) = fold (\\acc c -> acc * x + c) 0.0 cs",
     lambda v: np.sum(v[0] * v[1] ** np.arange(len(v[0]) - 1, -1, -1.0))),
    ("cosine-similarity", "([1.0, 2.0, -0.5], [0.3, -1.5, 2.2])", None,
     "def dot a b = sum (map2 (\\x y -> x * y) a b)\n"
     "def main (a, b) = dot a b / (sqrt (dot a a) * sqrt (dot b b))",
     lambda v: np.dot(v[0], v[1]) / (np.linalg.norm(v[0]) * np.linalg.norm(v[1]))),
]


def numpy_input(x):
    """A Cotangent input literal (parsed as Python) with its lists of numbers as numpy arrays."""
    if isinstance(x, list):
        return np.array(x, dtype=float)
    if isinstance(x, tuple):
        return tuple(numpy_input(y) for y in x)
    return x


def array_gradient(fn, at):
    """autograd's gradient of fn at the input, flattened as Cotangent's `gradient` is: every real
    leaf left to right, arrays row-major, integers skipped."""
    point = numpy_input(ast.literal_eval(at))
    slots = []  # the real parts (arrays and floats) of the input, in order

    def collect(x):
        if isinstance(x, tuple):
            for y in x:
                collect(y)
        elif not isinstance(x, int):
            slots.append(x)
    collect(point)

    def rebuild(x, reals):
        if isinstance(x, tuple):
            return tuple(rebuild(y, reals) for y in x)
        return x if isinstance(x, int) else next(reals)

    g = grad(lambda reals: fn(rebuild(point, iter(reals))))(tuple(slots))
    return [float(w) for part in g for w in np.ravel(part)]


def euler(v):
    x, vel = 1.0, 0.0
    h = v[1] / 10.0
    for _ in range(20):
        x, vel = x + h * vel, vel - h * v[0] * x
    return x * x + vel * vel


def leaves(s):
    return [float(t) for t in s.replace("(", " ").replace(")", " ").replace(",", " ").split()]


def close(a, b, tol=1e-9):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def main():
    exe = sys.argv[1]
    passed = failed = 0
    cases = [(name, at, seed, src, (fn or euler, False)) for name, at, seed, src, fn in CASES]
    cases += [(name, at, seed, src, (fn, True)) for name, at, seed, src, fn in ARRAY_CASES]
    for name, at, seed, src, (fn, arrays) in cases:
        want = array_gradient(fn, at) if arrays else list(grad(fn)(np.array(leaves(at))))
        args = [exe, "run", "-", "--at", at, "--json"] + (["--seed", seed] if seed else [])
        out = subprocess.run(args, input=src + "\n", capture_output=True, text=True)
        if out.returncode not in (0, 1):
            print(f"FAIL {name}: exit {out.returncode}: {out.stderr.strip()}")
            failed += 1
            continue
        doc = json.loads(out.stdout)
        ok = True
        for st in doc["stages"]:
            if st["ok"] is not True:
                continue
            got = st["gradient"]
            if len(got) != len(want) or not all(close(g, w) for g, w in zip(got, want)):
                print(f"FAIL {name} [{st['id']}]: cotangent {got} vs autograd {want}")
                ok = False
        ran = sum(1 for st in doc["stages"] if st["ok"] is True)
        if ok and ran > 0:
            passed += 1
            print(f"ok   {name}: {ran} stages agree with autograd {[round(float(w), 6) for w in want]}")
        else:
            failed += 1
            if ran == 0:
                print(f"FAIL {name}: no stage ran")
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
