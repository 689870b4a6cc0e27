"""`trainer-infra diff`: what a change does to a stack, computed offline from two renders.

fields.py compares two values field by field; compare.py compares two renders (objects, Helm
releases, the resource graph and its protection); report.py prints the result as text or Markdown;
git.py renders a git ref in a temporary worktree with that checkout's own code.
"""
