# The wf-2302 boundary decision of examples/wf-2302, as a Rego policy for
# OPA: the same tool manifest, the same outputs schema and the same rule,
# so the same check body gets the same outcome from both servers.
#
# Query it at POST /v1/data/writ/wf2302/decision with {"input": CHECK},
# where CHECK is a writ check request (examples/wf-2302/requests/*.json).
package writ.wf2302

# The pack's tool manifest (examples/wf-2302/tools.yaml) and the action
# class of its one decision spec (specs/workflow-handoff-note.yaml).
tools := {"workflow.update_handoff_note": {
	"decision_key": "workflow.handoff_note.update",
	"action_class": "system_change",
	"approval_mode_ceiling": "local_write",
}}

tool := tools[input.tool]

# Rule 1 (writ: policy.Resolve): a tool outside the manifest is refused.
reasons contains {"code": "unknown_tool", "message": sprintf("tool %q is not in the tool manifest", [input.tool])} if {
	not tool
}

# Rule 2 (writ: the spec's outputs_schema): an object with workflow_ref, a
# string, and note_length, an integer not below zero, and nothing else.
output_fields := {"workflow_ref", "note_length"}

outputs_valid if {
	is_object(input.outputs)
	every k, _ in input.outputs {
		k in output_fields
	}
	not bad_output
}

bad_output if {
	"workflow_ref" in object.keys(input.outputs)
	not is_string(input.outputs.workflow_ref)
}

bad_output if {
	"note_length" in object.keys(input.outputs)
	not valid_length(input.outputs.note_length)
}

valid_length(n) if {
	is_number(n)
	n == floor(n)
	n >= 0
}

reasons contains {"code": "invalid_outputs", "message": "outputs do not match the spec's outputs_schema"} if {
	tool
	"outputs" in object.keys(input)
	not outputs_valid
}

# Rule 3 (writ: R_WORKFLOW_UPDATE_NEEDS_LEGAL_REVIEW of
# policies/workflow-changes.yaml): a system change runs only once legal
# review has approved it.
approved_statuses := {"approved", "approved_with_follow_up"}

legal_review_approved if {
	some e in input.evidence
	e.kind == "legal_review"
	e.attributes.status in approved_statuses
}

replan_upstream if {
	tool.action_class == "system_change"
	not legal_review_approved
}

decision := {
	"outcome": "goal_fail_terminal",
	"safe_to_execute": false,
	"disposition": {"mode": "terminal_block"},
	"reasons": reasons,
} if {
	count(reasons) > 0
} else := {
	"outcome": "replan_required",
	"safe_to_execute": false,
	"disposition": {"mode": "upstream_replan"},
	"reasons": [{
		"code": "missing_upstream_support",
		"rule_id": "R_WORKFLOW_UPDATE_NEEDS_LEGAL_REVIEW",
		"message": "The workflow update is missing required upstream approval.",
	}],
	"decision_key": tool.decision_key,
} if {
	replan_upstream
} else := {
	"outcome": "allow",
	"safe_to_execute": true,
	"disposition": {"mode": "continue_downstream"},
	"reasons": [],
	"decision_key": tool.decision_key,
}
