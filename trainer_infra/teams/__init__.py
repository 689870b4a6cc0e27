"""The team model (`teams[]`): read by every area that plans for teams, so it sits below them all."""
