"""The support-ticket assistant: the sample chatbot under test (`lobeval.samples.support_tickets:SupportTicketBot`)."""
from lobeval.samples.support_tickets.bot import SupportTicketBot, TrustingBot

__all__ = ["SupportTicketBot", "TrustingBot"]
