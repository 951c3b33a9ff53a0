"""Tables beside images and plates (Fractal/ngio table spec V1, AnnData): read, write,
plate conditions."""
