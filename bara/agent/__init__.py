"""Model-invoked tools and the bounded agent loop that runs them."""

from bara.agent.loop import (COMPLETE, ERROR, INCOMPLETE, INCOMPLETE_NOTE, AgentEvent, AgentRun, ToolCallRecord,
                             run_agent)
from bara.agent.tools import (Tool, ToolContext, ToolError, ToolResult, ToolServices, format_validation_error,
                              run_tool, toolbox)

__all__ = [
    "AgentEvent", "AgentRun", "COMPLETE", "ERROR", "INCOMPLETE", "INCOMPLETE_NOTE", "Tool", "ToolCallRecord",
    "ToolContext", "ToolError", "ToolResult", "ToolServices", "format_validation_error", "run_agent", "run_tool", "toolbox",
]
