"""/v1/search: router (the route), protocol (its request and response), serving (retrieval as a
RetrievalPlan says, plan.py), the Passage it returns; the chat retrieves through it too."""
