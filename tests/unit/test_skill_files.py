"""Skill files: every field of the format, Markdown front matter, exact messages for bad files."""

import textwrap

import pytest

from raytroupe.actors.skills.files import MAX_SKILL_BYTES, parse_skill, read_skill
from raytroupe.protocols import ConfigError
from raytroupe.protocols.skill import SkillSpec, compose_prompt

FULL = textwrap.dedent(
    """\
    name: invoice-extract
    version: "1.2.0"
    description: Pull the fields of an invoice.
    intent:
      keywords: [invoice, bill]
      description: Read invoices and return their fields.
      examples: ["What is the total of this invoice?", "Extract the invoice number"]
    execution_mode: react
    max_steps: 4
    prompt:
      identity: You are an accounts clerk.
      context: Invoices come from many vendors.
      instructions: Extract the invoice's number, total and due date.
      constraints: [Never invent a field, Use ISO dates]
      output_format: One JSON object.
    tools:
      - calculator
      - {name: http_get, required: false}
    llm: {alias: fast, temperature: 0.1, max_tokens: 400}
    input_schema:
      type: object
      properties: {text: {type: string}}
      required: [text]
    output_schema:
      type: object
      properties:
        number: {type: string}
        total: {type: number}
        due: {type: string, format: date}
      required: [number, total]
    quality_gate:
      required: [number]
      counts: [{field: number, unit: words, max: 3}]
      regex: [{pattern: "^INV-", field: number, message: invoice numbers start INV-}]
      validator: "tests.unit.test_skill_files:no_problems"
      judge: {model: fast, rubric: All fields are present., threshold: 0.5}
      max_retries: 2
    memory: {recall: true, recall_k: 2}
    """
)


def no_problems(_answer):
    return []


def _problems(text, *, markdown=False, source="skills/x.yaml"):
    with pytest.raises(ConfigError) as caught:
        parse_skill(text, source, markdown=markdown)
    return caught.value.detail["problems"]


def test_every_field_of_the_format_is_read():
    skill = parse_skill(FULL, "skills/invoice.yaml")
    assert skill.name == "invoice-extract"
    assert skill.version == "1.2.0"
    assert skill.intent.keywords == ("invoice", "bill")
    assert skill.intent.examples[1] == "Extract the invoice number"
    assert skill.execution_mode == "react"
    assert skill.max_steps == 4
    assert skill.prompt.constraints == ("Never invent a field", "Use ISO dates")
    assert [(t.name, t.required) for t in skill.tools] == [
        ("calculator", True),
        ("http_get", False),
    ]
    assert (skill.llm.alias, skill.llm.temperature, skill.llm.max_tokens) == ("fast", 0.1, 400)
    assert skill.input_schema["required"] == ["text"]
    assert skill.output_schema["properties"]["total"] == {"type": "number"}
    gate = skill.quality_gate
    assert gate.required == ("number",)
    assert gate.counts[0].max == 3
    assert gate.regex[0].pattern == "^INV-"
    assert gate.validator == "tests.unit.test_skill_files:no_problems"
    assert gate.judge.threshold == 0.5
    assert gate.max_retries == 2
    assert skill.memory.recall
    assert skill.memory.recall_k == 2
    assert skill.ref == "invoice-extract@1.2.0"
    prompt = compose_prompt(skill)
    for part in ("You are an accounts clerk.", "Context:\nInvoices", "- Use ISO dates",
                 "Output format:\nOne JSON object.", "JSON Schema"):  # fmt: skip
        assert part in prompt


def test_markdown_front_matter_and_its_body_as_instructions(tmp_path):
    path = tmp_path / "summarize.md"
    path.write_text(
        "---\nname: summarize\nversion: '1'\ndescription: Summaries.\nexecution_mode: direct\n"
        "---\n# Task\n\nSummarize the text in three sentences.\n",
        encoding="utf-8",
    )
    skill = read_skill(path)
    assert skill.prompt.instructions == "# Task\n\nSummarize the text in three sentences."
    assert skill.execution_mode == "direct"


def test_a_missing_field_is_named_with_the_line_of_its_mapping():
    problems = _problems("name: x\nversion: '1'\nprompt:\n  identity: hi\n")
    assert "skills/x.yaml:1: description: Field required" in problems
    assert "skills/x.yaml:3: prompt.instructions: Field required" in problems


def test_a_bad_value_is_named_with_its_own_line():
    text = FULL.replace("temperature: 0.1", "temperature: 7")
    (problem,) = _problems(text)
    assert problem == ("skills/x.yaml:19: llm.temperature: Input should be less than or equal to 2")


def test_a_bad_list_item_points_at_the_item():
    text = FULL.replace("counts: [{field: number, unit: words, max: 3}]",
                        "counts:\n    - {unit: words, max: 3}\n    - {unit: items}")  # fmt: skip
    (problem,) = _problems(text)
    assert problem == "skills/x.yaml:35: quality_gate.counts.1: a count rule needs min or max"


def test_markdown_lines_count_from_the_top_of_the_file():
    text = "---\nname: x\nversion: '1'\nexecution_mode: sideways\ndescription: d\n---\nDo it.\n"
    (problem,) = _problems(text, markdown=True, source="x.md")
    assert (
        problem
        == "x.md:4: execution_mode: 'sideways' is not 'react', 'direct' or 'team:<team name>'"
    )


def test_instructions_given_twice_in_markdown_are_refused():
    text = "---\nname: x\nversion: '1'\ndescription: d\nprompt:\n  instructions: A\n---\nB\n"
    (problem,) = _problems(text, markdown=True, source="x.md")
    assert (
        problem == "x.md:6: prompt.instructions: given twice: in the front matter and as the body"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: [unclosed\n", "skills/x.yaml:2: <file>: not valid YAML"),
        ("- a\n- b\n", "skills/x.yaml:1: <file>: a skill is a mapping, got list"),
        ("", "skills/x.yaml:1: <file>: a skill is a mapping, got nothing"),
    ],
)
def test_files_that_are_not_a_skill_mapping(text, expected):
    (problem,) = _problems(text)
    assert problem.startswith(expected)


def test_markdown_without_front_matter():
    assert _problems("# just text\n", markdown=True, source="x.md") == [
        "x.md:1: <file>: a Markdown skill starts with '---' front matter"
    ]
    assert _problems("---\nname: x\n", markdown=True, source="x.md") == [
        "x.md:1: <file>: the front matter is not closed by '---'"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('version: "1.2.0"', "version: '1 2'"), "version: '1 2' is not a version"),
        (
            ("execution_mode: react", "execution_mode: direct"),
            "tools are used by 'react' skills only",
        ),
        (("^INV-", "(unclosed"), "not a valid regular expression"),
        (('"tests.unit.test_skill_files:no_problems"', "os.system"), "is not an import path"),
        (
            ("type: object\n  properties: {text", "type: objekt\n  properties: {text"),
            "input_schema is not a valid JSON Schema",
        ),
        (
            ("  - calculator\n", "  - calculator\n  - calculator\n"),
            "tools listed twice: calculator",
        ),
    ],
)
def test_each_bad_field_says_what_is_wrong(change, expected):
    text = FULL.replace(*change)
    assert text != FULL
    problems = _problems(text)
    assert any(expected in p for p in problems), problems


def test_unknown_fields_are_refused_by_name():
    (problem,) = _problems(FULL + "colour: blue\n")
    assert problem.endswith("colour: Extra inputs are not permitted")


def test_a_file_too_big_or_unreadable(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (MAX_SKILL_BYTES + 1))
    with pytest.raises(ConfigError, match="at most"):
        read_skill(big)
    with pytest.raises(ConfigError, match="cannot read skill file"):
        read_skill(tmp_path / "missing.yaml")
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="cannot read skill file"):
        read_skill(binary)


def test_the_example_skills_all_load():
    from pathlib import Path  # noqa: PLC0415

    folder = Path(__file__).parents[2] / "examples" / "skills"
    skills = [read_skill(p) for p in sorted(folder.iterdir()) if p.suffix in {".yaml", ".md"}]
    assert len(skills) >= 6
    assert {s.execution_mode.split(":")[0] for s in skills} >= {"react", "direct", "team"}
    assert all(isinstance(s, SkillSpec) for s in skills)


def test_a_yaml_alias_bomb_is_refused_before_validation():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for n in range(1, 8):
        bomb += f"{'b' * n}: &{'b' * n} [" + ", ".join([f"*{'b' * (n - 1) or 'a'}"] * 10) + "]\n"
    (problem,) = _problems("name: x\n" + bomb)  # 10**8 values once expanded
    assert problem == "skills/x.yaml:1: <file>: more than 100000 values once aliases are expanded"
