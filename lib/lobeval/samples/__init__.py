"""Sample chatbots under test, for lobeval's offline demo and tests."""
