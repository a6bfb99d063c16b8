"""The tool of the real-miles multi-turn run (miles_driver.py --multi-turn): what miles'
``--generate-tool-specs-path`` and ``--generate-execute-tool-function-path`` load."""

TOOL_SPECS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


async def execute(name: str, params: dict) -> str:
    if name != "add":
        return f"unknown tool {name}"
    return str(int(params.get("a", 0)) + int(params.get("b", 0)))
