"""Plan repair: a planner's answer made into a plan where the fix is certain, before re-asking.

Small models write plans with mistakes a program can fix without guessing what was meant.
:func:`repair_plan` fixes those in the parsed JSON, each fix described (they go on the plan,
its span and its event), and leaves the rest to validation, whose exact problems go back to
the planner:

- a bare list of subtasks is taken as ``{"subtasks": [...]}``;
- a subtask without an id gets ``s<n>`` (its position); a repeated id gets ``-2``, ``-3``, ...;
- a role that differs from one of the team's only in case or surrounding space is that role;
  with a one-role team, any role is that role;
- a dependency naming no subtask, or the subtask itself, is dropped;
- a cycle is broken deterministically: walking the subtasks in order, depth first, an edge
  back to a subtask still being walked is dropped (the earlier subtask keeps its place);
- a plan longer than the team allows keeps its first ``max_subtasks`` subtasks (dependencies
  on the rest dropped).

What it cannot fix for certain (an unknown role in a team of several, a subtask without
instructions, a value of the wrong type) it leaves for the validation errors.
"""

from __future__ import annotations

from typing import Any

from raytroupe.protocols import TeamSpec

__all__ = ["repair_plan"]


def repair_plan(data: Any, team: TeamSpec) -> tuple[Any, list[str]]:
    """(``data`` with the certain fixes made, a description of each fix)."""
    repairs: list[str] = []
    if isinstance(data, list):
        data = {"subtasks": data}
        repairs.append("took the answer's list as the plan's subtasks")
    if not isinstance(data, dict) or not isinstance(data.get("subtasks"), list):
        return data, repairs
    data = {k: v for k, v in data.items() if k not in {"repairs", "fallback"}}  # ours to say
    subtasks = [dict(s) if isinstance(s, dict) else s for s in data["subtasks"]]
    if len(subtasks) > team.max_subtasks:
        repairs.append(
            f"kept the first {team.max_subtasks} of {len(subtasks)} subtasks (the team's limit)"
        )
        subtasks = subtasks[: team.max_subtasks]
    items = [s for s in subtasks if isinstance(s, dict)]
    _name(items, repairs)
    _roles(items, team, repairs)
    _dependencies(items, repairs)
    return {**data, "subtasks": subtasks}, repairs


def _name(items: list[dict[str, Any]], repairs: list[str]) -> None:
    """Ids for subtasks without one; repeated ids made unique."""
    seen: set[str] = set()
    for n, item in enumerate(items, start=1):
        given = item.get("id")
        if not isinstance(given, str) or not given.strip():
            item["id"] = _free(f"s{n}", seen)
            repairs.append(f"subtask {n} had no id: named it {item['id']!r}")
        elif given in seen:
            item["id"] = _free(given, seen)
            repairs.append(f"subtask {n} repeated the id {given!r}: renamed it {item['id']!r}")
        seen.add(item["id"])


def _free(base: str, seen: set[str]) -> str:
    if base not in seen:
        return base
    k = 2
    while f"{base}-{k}" in seen:
        k += 1
    return f"{base}-{k}"


def _roles(items: list[dict[str, Any]], team: TeamSpec, repairs: list[str]) -> None:
    """Roles that can only mean one of the team's."""
    by_folded = {r.casefold(): r for r in team.roles}
    for item in items:
        role = item.get("role")
        if isinstance(role, str) and role in team.roles:
            continue
        fixed = by_folded.get(role.strip().casefold()) if isinstance(role, str) else None
        if fixed is None and len(team.roles) == 1:
            fixed = team.roles[0]
        if fixed is not None:
            item["role"] = fixed
            repairs.append(f"subtask {item['id']!r}: role {role!r} taken as {fixed!r}")


def _dependencies(items: list[dict[str, Any]], repairs: list[str]) -> None:
    """Dependencies on nothing or on itself dropped; cycles broken depth first, in order."""
    known = {item["id"] for item in items}
    for item in items:
        deps = item.get("depends_on")
        if deps is None:
            continue
        if isinstance(deps, str):
            deps = [deps]
        if not isinstance(deps, list):
            continue
        kept = []
        for dep in deps:
            if dep == item["id"]:
                repairs.append(f"subtask {item['id']!r}: dropped its dependency on itself")
            elif isinstance(dep, str) and dep not in known:
                repairs.append(f"subtask {item['id']!r}: dropped {dep!r}, which is no subtask")
            elif dep not in kept:
                kept.append(dep)
        item["depends_on"] = kept
    _break_cycles(items, repairs)


def _break_cycles(items: list[dict[str, Any]], repairs: list[str]) -> None:
    """Depth first from each subtask in order (a stack: plans may be 1,024 long)."""
    by_id = {item["id"]: item for item in items}
    state: dict[str, int] = {}  # 1: being walked, 2: done
    for root in by_id:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, 0)]
        while stack:
            node, i = stack[-1]
            deps = by_id[node].get("depends_on")
            if not isinstance(deps, list) or i >= len(deps):
                state[node] = 2
                stack.pop()
                continue
            dep = deps[i]
            if isinstance(dep, str) and state.get(dep) == 1:
                del deps[i]  # the edge back closes a cycle: the next dependency is now at i
                repairs.append(f"subtask {node!r}: dropped its dependency on {dep!r} (a cycle)")
                continue
            stack[-1] = (node, i + 1)
            if isinstance(dep, str) and dep in by_id and dep not in state:
                state[dep] = 1
                stack.append((dep, 0))
