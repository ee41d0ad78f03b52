"""The tools of the published τ-bench and τ²-bench domains and what each does to the data, so that an imported
benchmark run is scored with the benchmark's own effects rather than effects guessed from names.

Looked up in the benchmarks' own sources:
- τ²-bench (sierra-research/tau2-bench) marks every tool with `@is_tool(ToolType.READ|WRITE|THINK|GENERIC)`:
  src/tau2/domains/airline/tools.py, src/tau2/domains/retail/tools.py, src/tau2/domains/telecom/tools.py (the
  agent's) and src/tau2/domains/telecom/user_tools.py (the user's phone, which the simulated user operates).
- τ-bench (sierra-research/tau-bench) has one class per tool, without a mark, in tau_bench/envs/airline/tools/
  and tau_bench/envs/retail/tools/: the same functions τ²-bench ported (τ²-bench adds get_flight_status and
  get_item_details), each changing the data exactly when its τ²-bench port is WRITE.

lobeval has two effects: "write" changes business data, "read" does not. τ²-bench's THINK (a scratchpad that
"will not obtain new information or change the database") and GENERIC (calculate; transfer_to_human_agents,
which only answers "Transfer successful") change no data: they are reads here.
"""
from __future__ import annotations

_READ, _WRITE = "read", "write"

TAU2_AIRLINE = {
    "book_reservation": _WRITE, "cancel_reservation": _WRITE, "send_certificate": _WRITE,
    "update_reservation_baggages": _WRITE, "update_reservation_flights": _WRITE,
    "update_reservation_passengers": _WRITE,
    "get_reservation_details": _READ, "get_user_details": _READ, "list_all_airports": _READ,
    "search_direct_flight": _READ, "search_onestop_flight": _READ, "get_flight_status": _READ,
    "calculate": _READ, "transfer_to_human_agents": _READ, "think": _READ,
}
TAU2_RETAIL = {
    "cancel_pending_order": _WRITE, "exchange_delivered_order_items": _WRITE, "modify_pending_order_address": _WRITE,
    "modify_pending_order_items": _WRITE, "modify_pending_order_payment": _WRITE, "modify_user_address": _WRITE,
    "return_delivered_order_items": _WRITE,
    "find_user_id_by_name_zip": _READ, "find_user_id_by_email": _READ, "get_order_details": _READ,
    "get_product_details": _READ, "get_item_details": _READ, "get_user_details": _READ,
    "list_all_product_types": _READ, "calculate": _READ, "transfer_to_human_agents": _READ, "think": _READ,
}
TAU2_TELECOM = {
    "suspend_line": _WRITE, "resume_line": _WRITE, "send_payment_request": _WRITE, "enable_roaming": _WRITE,
    "disable_roaming": _WRITE, "refuel_data": _WRITE,
    "get_customer_by_phone": _READ, "get_customer_by_id": _READ, "get_customer_by_name": _READ,
    "get_details_by_id": _READ, "get_bills_for_customer": _READ, "get_data_usage": _READ,
    "transfer_to_human_agents": _READ,
}
TAU2_TELECOM_USER = {
    "set_network_mode_preference": _WRITE, "toggle_airplane_mode": _WRITE, "reseat_sim_card": _WRITE,
    "toggle_data": _WRITE, "toggle_roaming": _WRITE, "toggle_data_saver_mode": _WRITE, "set_apn_settings": _WRITE,
    "reset_apn_settings": _WRITE, "toggle_wifi": _WRITE, "toggle_wifi_calling": _WRITE, "connect_vpn": _WRITE,
    "disconnect_vpn": _WRITE, "grant_app_permission": _WRITE, "reboot_device": _WRITE, "make_payment": _WRITE,
    "check_status_bar": _READ, "check_network_status": _READ, "check_network_mode_preference": _READ,
    "run_speed_test": _READ, "check_sim_status": _READ, "check_data_restriction_status": _READ,
    "check_apn_settings": _READ, "check_wifi_status": _READ, "check_wifi_calling_status": _READ,
    "check_vpn_status": _READ, "check_installed_apps": _READ, "check_app_status": _READ,
    "check_app_permissions": _READ, "can_send_mms": _READ, "check_payment_request": _READ,
}
# τ-bench's own tool folders: the τ²-bench ports less the two tools τ²-bench added.
TAU_BENCH_AIRLINE = {name: effect for name, effect in TAU2_AIRLINE.items() if name != "get_flight_status"}
TAU_BENCH_RETAIL = {name: effect for name, effect in TAU2_RETAIL.items() if name != "get_item_details"}

DOMAINS = {"tau-bench": {"airline": TAU_BENCH_AIRLINE, "retail": TAU_BENCH_RETAIL},
           "tau2": {"airline": TAU2_AIRLINE, "retail": TAU2_RETAIL, "telecom": {**TAU2_TELECOM, **TAU2_TELECOM_USER}}}


def known_effect(name: str) -> str | None:
    """The effect of a tool of any published domain (a name means the same in every domain that has it), or None."""
    for domains in DOMAINS.values():
        for tools in domains.values():
            if name in tools:
                return tools[name]
    return None
