import click
@click.group()
def cli():
    """vllm-advisor"""
