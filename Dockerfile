# One image for every Frontier process (web, worker, migrate), as in docker-compose.yml.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml README.md constraints.txt ./
COPY dashboard ./dashboard
COPY optimizer ./optimizer
COPY verifiers_app ./verifiers_app
# The wheel carries the served files too (pyproject.toml's force-include).
COPY templates ./templates
COPY static ./static
COPY examples ./examples
RUN pip install --no-cache-dir -c constraints.txt .
COPY . .
# Static files hashed and compressed once, into the image (ServeStatic serves them);
# `manage.py serve` in the container then finds them current and starts at once.
RUN python manage.py shell -v 0 -c "from dashboard.staticfiles import collect_static_files; collect_static_files()"
RUN useradd --create-home frontier && mkdir -p /app/var && chown -R frontier /app/var
USER frontier
EXPOSE 8000
CMD ["python", "manage.py", "serve", "--host", "0.0.0.0", "--port", "8000"]
