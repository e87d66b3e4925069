from django.apps import AppConfig


class TasksetsConfig(AppConfig):
    name = "optimizer.tasksets"
    label = "tasksets"
    verbose_name = "Task sets"
