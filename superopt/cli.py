"""The `superopt` toolbox command."""
import click


@click.group()
@click.version_option(package_name="nvcc-plus")
def main() -> None:
    """superopt: optimize, verify and measure PTX kernels."""
