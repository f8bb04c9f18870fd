"""BayesianNetwork: moral graph, blankets, quilts, inference against enumeration and pgmpy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from correlated_oracle import chain_probabilities, chain_quilts, sequences

from bayesdp import rng_for_tests
from bayesdp.correlated import (
    BayesianNetwork,
    MarkovChain,
    dp_to_bdp,
    max_influence,
    quilt_calibration,
)
from bayesdp.errors import InvalidParameter


def v_structure(seed: int) -> BayesianNetwork:
    """A -> C <- B, C -> D, D -> E (binary, except C with 3 states)."""
    rng = rng_for_tests(seed)
    return BayesianNetwork(
        {"A": [], "B": [], "C": ["A", "B"], "D": ["C"], "E": ["D"]},
        cpts={"A": rng.dirichlet(np.ones(2)), "B": rng.dirichlet(np.ones(2)),
         "C": rng.dirichlet(np.ones(3), size=(2, 2)), "D": rng.dirichlet(np.ones(2), size=3),
         "E": rng.dirichlet(np.ones(2), size=2)},
    )


def chain_network(chain: MarkovChain, length: int) -> BayesianNetwork:
    names = [f"x{j}" for j in range(length)]
    parents = {names[0]: []} | {names[j]: [names[j - 1]] for j in range(1, length)}
    cpts = {names[0]: chain.stationary} | {n: chain.transition for n in names[1:]}
    return BayesianNetwork(parents, cpts=cpts)


def brute_joint(net: BayesianNetwork) -> tuple[np.ndarray, np.ndarray]:
    """Every assignment (rows) and its probability, by the chain rule over the CPTs."""
    cards = [net.cardinality[v] for v in net.nodes]
    rows = np.array(list(itertools.product(*[range(c) for c in cards])))
    prob = np.ones(len(rows))
    for j, v in enumerate(net.nodes):
        idx = (*tuple(rows[:, net.nodes.index(p)] for p in net.parents[v]), rows[:, j])
        prob *= net.cpts[v][idx]
    return rows, prob


def brute_influence(net: BayesianNetwork, node: str, quilt: list[str], known: list[str]) -> float:
    rows, prob = brute_joint(net)
    i = net.nodes.index(node)
    qi = [net.nodes.index(v) for v in quilt]
    ki = [net.nodes.index(v) for v in known]
    best = 0.0
    for xk in itertools.product(*[range(net.cardinality[v]) for v in known]):
        sel = np.all(rows[:, ki] == np.array(xk), axis=1) if ki else np.ones(len(rows), bool)
        cond = {}
        for a in range(net.cardinality[node]):
            m = sel & (rows[:, i] == a)
            if prob[m].sum() > 0:
                keys = [tuple(r) for r in rows[m][:, qi]]
                tab: dict[tuple[int, ...], float] = {}
                for key, w in zip(keys, prob[m], strict=True):
                    tab[key] = tab.get(key, 0.0) + w / prob[m].sum()
                cond[a] = tab
        for a, b in itertools.permutations(cond, 2):
            for key, pa in cond[a].items():
                pb = cond[b].get(key, 0.0)
                if pa > 0:
                    best = max(best, np.inf if pb == 0 else float(np.log(pa / pb)))
    return best


def test_moral_graph_and_blanket() -> None:
    net = v_structure(1)
    moral = net.moral_graph()
    assert "B" in moral["A"]  # parents of C are married
    assert net.markov_blanket("C") == {"A", "B", "D"}
    assert net.markov_blanket("A") == {"B", "C"}
    assert net.markov_blanket("E") == {"D"}


def test_quilts_are_separators() -> None:
    net = v_structure(2)
    adj = net.moral_graph()
    for v in net.nodes:
        quilts = net.quilts(v)
        assert quilts[-1].nodes == () and len(quilts[-1].nearby) == len(net.nodes)
        for q in quilts:
            assert v in q.nearby
            assert set(q.nodes) | set(q.nearby) | set(q.remote) == set(net.nodes)
            # no moral edge from the nearby set to the remote set
            assert not any(adj[n] & set(q.remote) for n in q.nearby)
    assert net.quilts("D")[0].nodes == ("C", "E")  # the Markov blanket comes first


@pytest.mark.parametrize("node", ["A", "C", "D"])
def test_influence_matches_enumeration(node: str) -> None:
    net = v_structure(3)
    for q in net.quilts(node):
        assert net.max_influence(node, q.nodes) == pytest.approx(
            brute_influence(net, node, list(q.nodes), []), rel=1e-12, abs=1e-14)
        others = [v for v in net.nodes if v != node and v not in q.nodes]
        want = max(brute_influence(net, node, list(q.nodes), list(kn))
                   for r in range(len(others) + 1) for kn in itertools.combinations(others, r))
        assert net.max_influence(node, q.nodes, "bdp") == pytest.approx(want, rel=1e-12, abs=1e-14)


def test_chain_shaped_network_agrees_with_the_closed_form() -> None:
    chain = MarkovChain(rng_for_tests(4).dirichlet(np.ones(3) * 2, size=3))
    length = 6
    net = chain_network(chain, length)
    seqs = sequences(3, length)
    _rows, prob = brute_joint(net)
    np.testing.assert_allclose(prob, chain_probabilities(chain.transition, chain.stationary, seqs))
    for node in range(length):
        for quilt, _ in chain_quilts(node, length):
            names = [f"x{j}" for j in quilt]
            for notion in ("pufferfish", "bdp"):
                assert max_influence(net, f"x{node}", names, notion) == pytest.approx(
                    max_influence(chain, node, quilt, notion, length=length), rel=1e-11, abs=1e-13)
    for eps in (1.0, 4.0):
        for notion in ("pufferfish", "bdp"):
            a = quilt_calibration(chain, length, eps, notion=notion)
            b = quilt_calibration(net, None, eps, notion=notion)
            assert b.sigma == pytest.approx(a.sigma, rel=1e-12)
            assert quilt_calibration(net, None, eps, notion=notion, node="x1").sigma == \
                pytest.approx(quilt_calibration(chain, length, eps, notion=notion, node=1).sigma)
    assert dp_to_bdp(0.1, net, None) == pytest.approx(dp_to_bdp(0.1, chain, length), rel=1e-12)


def test_pgmpy_conversion_and_inference() -> None:
    models = pytest.importorskip("pgmpy.models")
    factors = pytest.importorskip("pgmpy.factors.discrete")
    inference = pytest.importorskip("pgmpy.inference")
    ours = v_structure(5)
    cls = getattr(models, "DiscreteBayesianNetwork", None) or models.BayesianNetwork
    model = cls([("A", "C"), ("B", "C"), ("C", "D"), ("D", "E")])
    for v in ours.nodes:
        ps = list(ours.parents[v])
        table = np.moveaxis(ours.cpts[v], -1, 0)
        model.add_cpds(factors.TabularCPD(
            v, ours.cardinality[v], table.reshape(ours.cardinality[v], -1),
            evidence=ps or None, evidence_card=[ours.cardinality[p] for p in ps] or None))
    back = BayesianNetwork.from_pgmpy(model)
    perm = [back.nodes.index(v) for v in ours.nodes]
    np.testing.assert_allclose(np.transpose(back.joint(), perm), ours.joint(), atol=1e-15)
    ve = inference.VariableElimination(model)
    res = ve.query(["C", "E"], evidence={"A": 1}, joint=True, show_progress=False)
    mine = ours.joint().sum(axis=(1, 3))[1]  # P(C, E, A=1)
    np.testing.assert_allclose(res.values, mine / mine.sum(), atol=1e-12)


def test_bad_networks() -> None:
    with pytest.raises(InvalidParameter, match="acyclic"):
        BayesianNetwork({"A": ["B"], "B": ["A"]}, cpts={"A": np.full((2, 2), 0.5), "B": np.full((2, 2), 0.5)})
    with pytest.raises(InvalidParameter, match="shape"):
        BayesianNetwork({"A": [], "B": ["A"]}, cpts={"A": [0.5, 0.5], "B": [0.5, 0.5]})
    with pytest.raises(InvalidParameter, match="row sum"):
        BayesianNetwork({"A": [], "B": []}, cpts={"A": [0.5, 0.6], "B": [0.5, 0.5]})
    with pytest.raises(InvalidParameter, match="names among"):
        BayesianNetwork({"A": [], "B": ["Z"]}, cpts={"A": [0.5, 0.5], "B": [0.5, 0.5]})
    with pytest.raises(InvalidParameter, match="cpts"):
        BayesianNetwork({"A": [], "B": []}, cpts={"A": [0.5, 0.5]})
    net = v_structure(6)
    with pytest.raises(InvalidParameter, match="node"):
        net.max_influence("Z", ["A"])
    with pytest.raises(InvalidParameter, match="quilt"):
        net.max_influence("A", ["A"])
    with pytest.raises(InvalidParameter, match="approx"):
        quilt_calibration(net, None, 1.0, method="approx")
    with pytest.raises(InvalidParameter, match="length"):
        quilt_calibration(net, 7, 1.0)


def test_quilts_cover_every_connected_nearby_set() -> None:
    rng = rng_for_tests(8)
    names = [f"v{j}" for j in range(7)]
    parents = {v: [u for u in names[:j] if rng.random() < 0.35] for j, v in enumerate(names)}
    cpts = {v: rng.dirichlet(np.ones(2), size=(2,) * len(parents[v])) for v in names}
    net = BayesianNetwork(parents, cpts=cpts)
    adj = net.moral_graph()

    def connected(nodes: set[str]) -> bool:
        seen, todo = set(), [next(iter(nodes))]
        while todo:
            u = todo.pop()
            if u not in seen:
                seen.add(u)
                todo.extend(adj[u] & nodes)
        return seen == nodes

    for v in names:
        want = {frozenset(c) | {v} for r in range(len(names))
                for c in itertools.combinations([u for u in names if u != v], r)
                if connected(set(c) | {v})}
        got = [frozenset(q.nearby) for q in net.quilts(v)]
        assert len(got) == len(set(got))
        assert set(got) == want | {frozenset(names)}  # every connected set, plus the trivial
