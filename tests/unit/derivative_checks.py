"""What the autodiff tests share (test_autodiff*.py): their programs' form (derivative_source), and the check of
a function's vjp against central finite differences and of its jvp against the vjp by duality,
<v, J u> = <Jᵀ v, u>, through the interpreter (check_vjp_jvp)."""

import numpy as np
import pytest


def check_vjp_jvp(m, name: str, xs: list, rng, h: float, fd_rtol: float, dual_rtol: float,
                  fd_atol: float = 1e-12) -> tuple[float, float]:
    """For the function `name` of the module `m` (with `vjp_name` and `jvp_name` declared) at the inputs `xs`:
    both derivatives' primal results equal f's (rtol 1e-12); <vjp(v), u> agrees with the central difference
    of <v, f> along random directions u (step h) to fd_rtol (absolute fd_atol), and <v, jvp(u)> with
    <vjp(v), u> to dual_rtol. u, then v, are drawn from `rng`. Returns (the difference, <v, jvp(u)>)."""
    us = [rng.standard_normal(np.shape(x)) for x in xs]
    y = np.asarray(m.interpret(name, *xs))
    v = rng.standard_normal(y.shape)
    out = m.interpret(f"vjp_{name}", *xs, v)
    np.testing.assert_allclose(out[0], y, rtol=1e-12)
    cts = out[1:]
    assert [np.shape(c) for c in cts] == [np.shape(x) for x in xs], name
    vjp_u = sum(float(np.sum(c * u)) for c, u in zip(cts, us))
    plus = m.interpret(name, *[x + h * u for x, u in zip(xs, us)])
    minus = m.interpret(name, *[x - h * u for x, u in zip(xs, us)])
    fd = float(np.sum(v * (plus - minus))) / (2 * h)
    assert vjp_u == pytest.approx(fd, rel=fd_rtol, abs=fd_atol), f"{name}: <vjp(v), u> {vjp_u} vs the difference {fd}"
    jv = m.interpret(f"jvp_{name}", *xs, *us)
    np.testing.assert_allclose(jv[0], y, rtol=1e-12)
    jvp_v = float(np.sum(v * jv[1]))
    assert jvp_v == pytest.approx(vjp_u, rel=dual_rtol, abs=1e-12), \
        f"{name}: <v, jvp(u)> {jvp_v} vs <vjp(v), u> {vjp_u}"
    return fd, jvp_v


def derivative_source(imports: str, functions) -> str:
    """A file of @functions, each with vjp_<name> and jvp_<name> declared: the line `imports`, then one for each
    (name, its parameters, the expression it returns) of `functions`."""
    lines = [imports, ""]
    for name, params, body in functions:
        lines += ["@function", f"def {name}({params}):", f"    return {body}", "",
                  f"vjp_{name} = vjp({name})", f"jvp_{name} = jvp({name})", ""]
    return "\n".join(lines)
