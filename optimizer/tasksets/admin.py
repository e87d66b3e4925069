from django.contrib import admin

from optimizer.tasksets.models import Task, TaskSet


class TaskInline(admin.TabularInline):
    model = Task
    extra = 0
    fields = ["task_id", "split", "input"]
    show_change_link = True


@admin.register(TaskSet)
class TaskSetAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "shared", "updated_at"]
    search_fields = ["name"]
    inlines = [TaskInline]


@admin.register(Task)
class TaskAdmin(admin.ModelAdmin):
    list_display = ["task_id", "task_set", "split"]
    list_filter = ["split"]
    search_fields = ["task_id", "input"]
