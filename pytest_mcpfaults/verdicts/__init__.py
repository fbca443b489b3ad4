"""What the journal means for the test: patience and stall verdicts, hints from what the client did, the
``assert_client_*`` checks: a new verdict goes here."""
