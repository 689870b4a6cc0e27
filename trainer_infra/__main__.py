from trainer_infra.cli import run

run()
